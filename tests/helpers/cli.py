"""Running the ``streamconv`` command as a user would, and what its result must show."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 120, env: dict | None = None, cwd=None):
    """Run ``python -m streamconv ARGS`` and return the CompletedProcess (text output)."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "streamconv", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd)


TINY = "test:64x48,frames=3"  # a source that costs nothing to open and run


def assert_error(result: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """The run failed with ``code`` and one streamconv error line holding every fragment."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("streamconv: error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "streamconv: error:" not in result.stderr, result.stderr


def assert_usage(result, *fragments: str) -> None:
    """Exit 2 with argparse's usage line, and an error line holding every fragment; no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert "usage: streamconv" in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error:" in line]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def cli_env() -> dict:
    """The environment run_cli gives ``python -m streamconv``: this checkout first on the path."""
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_quiet(cli, *args: str, cwd=None):
    return cli("run", *args, "--backend", "cpu", "-q", "--no-progress", cwd=cwd)


def run_limited(args: list[str], *, file_size: int, cwd: Path) -> subprocess.CompletedProcess:
    """Run the CLI with the kernel refusing writes past ``file_size`` bytes per file (EFBIG),
    which an encoder meets exactly as it meets a full disk: a failed write() mid-stream."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "streamconv", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd, preexec_fn=limit)


def pipe_cli(*args: str, stdin: bytes = b"", cwd=None) -> subprocess.CompletedProcess:
    """Run ``python -m streamconv ARGS`` with ``stdin`` piped in; stdout comes back as bytes."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "streamconv", *args], input=stdin,
                          capture_output=True, timeout=120, env=env, cwd=cwd)
