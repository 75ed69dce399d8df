"""The ``streamconv`` command's entry point: the signal handlers go in before anything heavy.

Importing the CLI loads NumPy, OpenCV and PyAV (a few hundred milliseconds). A Ctrl-C or
SIGTERM in that time must end the command as one anywhere else does (exit 130 or 143, one
line, no traceback), so the guard is installed first and handed to :func:`streamconv.cli.main`.
"""

from __future__ import annotations

import sys
from typing import Sequence

from .interrupts import SignalGuard


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``streamconv`` command; returns the process exit code."""
    with SignalGuard() as guard:
        # While the imports run, a signal is only recorded: raised inside importlib (a module
        # lock's callback) it would be printed as "Exception ignored" and lost.
        guard.deferred = True
        try:
            from .cli import main as cli_main  # heavy: under the guard
        finally:
            guard.deferred = False
        if guard.received is not None:
            sys.stderr.write("streamconv: interrupted\n")
            return 128 + guard.received
        try:
            return cli_main(argv, signals=guard)
        finally:
            # The command has ended: a signal now only is recorded, or it would raise in the
            # guard's own exit and print a traceback after the command's last word.
            guard.deferred = True
