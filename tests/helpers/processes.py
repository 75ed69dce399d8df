"""Child processes of a test: a real run to signal, an example script, this process's memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.cli import REPO


def resident_bytes() -> int:
    """This process's resident set size, from /proc (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Run:
    """``python -m streamconv ARGS`` in a child process whose stderr is collected line by line."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen([sys.executable, "-m", "streamconv", *args], cwd=cwd,
                                        env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, test, what: str, timeout: float = 60) -> None:
        """Poll until ``test()`` holds while the child runs; fail with ``what`` otherwise."""
        deadline = time.monotonic() + timeout
        while not test():
            assert self.process.poll() is None, f"exited ({self.process.returncode}) before {what}: {self.stderr}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.stderr}"
            time.sleep(0.01)

    def wait_for_line(self, fragment: str) -> None:
        self.wait_for(lambda: any(fragment in line for line in self.lines), repr(fragment))

    def handlers_installed(self) -> bool:
        """True once the child catches SIGTERM: streamconv's guard is in (Python alone catches
        only SIGINT), which it installs before its heavy imports."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return False
        caught = int(next(line.split()[1] for line in status.splitlines()
                          if line.startswith("SigCgt:")), 16)
        return bool(caught & (1 << (signal.SIGTERM - 1)))

    def finish(self, timeout: float = 120) -> int:
        try:
            self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode


def leftovers(folder: Path) -> list[str]:
    """Temporary files streamconv would have left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


def checkout_env() -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH."""
    paths = [str(REPO), os.environ.get("PYTHONPATH")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))


def run_example(name: str, *args: str, tmp_path):
    return subprocess.run([sys.executable, str(REPO / "examples" / name), *args],
                          capture_output=True,
                          text=True, timeout=120, env=checkout_env(), cwd=tmp_path)
