"""A closed, broken or full stderr loses the messages, never the run.

Produced for real: the child's descriptor 2 closed (``2>&-``), the write end of a pipe whose
reader has gone (``2>&1 | head -n 1`` once head has its line), and ``/dev/full``
(``2>/dev/full``), for ``run`` (logging with ``-v``, FFmpeg's log, the summary table) and for
a batch whose worker processes inherit that stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import av
import pytest

from helpers.cli import REPO
from helpers.clips import write_clip

STATES = ["closed", "broken", "full"]


def run_with_stderr(state: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m streamconv ARGS`` with stderr closed, a pipe nobody reads, or /dev/full."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "streamconv", *args]
    if state == "closed":
        return subprocess.run(command, stdout=subprocess.PIPE, cwd=cwd, env=env, timeout=120,
                              preexec_fn=lambda: os.close(2), check=False)
    if state == "full":
        with open("/dev/full", "wb") as full:
            return subprocess.run(command, stdout=subprocess.PIPE, stderr=full, cwd=cwd, env=env,
                                  timeout=120, check=False)
    read, write = os.pipe()
    os.close(read)  # the reader has gone: every write to stderr fails with EPIPE
    try:
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=write, cwd=cwd, env=env,
                              timeout=120, check=False)
    finally:
        os.close(write)


def frames_in(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.mark.parametrize("state", STATES)
def test_a_run_with_a_closed_broken_or_full_stderr_writes_its_output_and_exits_0(tmp_path, state):
    write_clip(tmp_path / "in.mp4", frames=8)
    result = run_with_stderr(state, "run", "in.mp4", "-o", "out.mp4", "--filter", "box", "-v",
                             "--backend", "cpu", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == b"", result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.mp4"]
    assert frames_in(tmp_path / "out.mp4") == 8


@pytest.mark.parametrize("state", STATES)
def test_a_batch_and_its_worker_processes_with_such_a_stderr_finish_every_input(tmp_path, state):
    for name in ("a.mp4", "b.mp4"):
        write_clip(tmp_path / name, frames=6)
    result = run_with_stderr(state, "batch", "a.mp4", "b.mp4", "-o", "out", "--processes", "2",
                             "-v", "--backend", "cpu", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == b"", result.stdout
    assert frames_in(tmp_path / "out" / "a.mp4") == frames_in(tmp_path / "out" / "b.mp4") == 6


def test_the_library_runs_in_a_process_started_with_stderr_closed(tmp_path):
    """Python makes ``sys.stderr`` None there: the progress bar asked it isatty() and failed."""
    code = ("import streamconv; streamconv.Pipeline('test:64x48,frames=3', ['box'], 'out.mp4', "
            "backend='cpu', progress=True).run()")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=tmp_path,
                            env=env, timeout=120, preexec_fn=lambda: os.close(2), check=False)
    assert result.returncode == 0, result.stdout
    assert frames_in(tmp_path / "out.mp4") == 3
