"""The ``streamconv`` command's entry point: signals are held before anything else is imported.

A Ctrl-C or SIGTERM at any moment must end the command as one anywhere else does (exit 130 or
143, one line, no traceback). Importing this module starts the command: ``python -m streamconv``
and the console script import it first (``import streamconv`` itself runs no import) and call
:func:`main` at once. Its first statement blocks SIGINT and SIGTERM, so that one arriving while
Python loads the rest stays pending in the kernel instead of being raised inside an import;
:func:`main` installs the guard, lets the held signals through to it, makes a closed, broken or
full stderr harmless, and only then imports the CLI (NumPy, OpenCV, PyAV: a few hundred
milliseconds), during which the guard records a signal and ends the command after.
"""

import _signal  # built into the interpreter and loaded with it: this imports nothing

_HELD = {_signal.SIGINT, _signal.SIGTERM}
_MASK = getattr(_signal, "pthread_sigmask", None)  # POSIX's; elsewhere nothing is held
if _MASK is not None:
    _MASK(_signal.SIG_BLOCK, _HELD)  # first: main() releases them once its guard is in

import sys  # noqa: E402  (after the hold, as every import)
from collections.abc import Sequence  # noqa: E402

from .interrupts import SignalGuard  # noqa: E402
from .files.standard_streams import steady_standard_streams  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``streamconv`` command; returns the process exit code."""
    with SignalGuard() as guard:
        # While the imports run, a signal is only recorded: raised inside importlib (a module
        # lock's callback) it would be printed as "Exception ignored" and lost.
        guard.deferred = True
        try:
            if _MASK is not None:
                _MASK(_signal.SIG_UNBLOCK, _HELD)  # a signal held since start-up lands here
            steady_standard_streams()
            if guard.received is None:
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
