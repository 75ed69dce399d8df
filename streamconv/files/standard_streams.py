"""The command's standard streams when they are closed, broken or full: the messages are lost,
never the run.

Cron jobs and daemons close stderr (``2>&-``), a reader that has read enough goes away
(``2>&1 | head -n 1``), a log's disk fills (``2>/dev/full``). :func:`steady_standard_streams`
makes each harmless before the command's work, in its process and in its worker processes:

- a closed descriptor 0, 1 or 2 is given ``/dev/null``, so that no file the run opens takes its
  number (FFmpeg writes its log to descriptor 2 in C, and child processes inherit it: a run's
  output opened as descriptor 2 would get their lines). Standard input so reads nothing, and
  standard output refuses every write (``-o -`` fails as with any unwritable output), while
  messages to stderr are dropped;
- ``sys.stderr`` writes straight to descriptor 2 and drops what it cannot write (EPIPE, ENOSPC,
  EBADF): the progress bar, logging, warnings, the summary table and the error lines go on
  as if written, and nothing is left buffered for the interpreter's exit to fail on.
"""

from __future__ import annotations

import io
import os
import sys

_NULL_MODES = {0: os.O_RDONLY, 1: os.O_RDONLY, 2: os.O_WRONLY}
"""How /dev/null is opened on each standard descriptor found closed: read-only on standard
output, so that a write there fails rather than vanishes."""


class DroppingStderr(io.TextIOBase):
    """A text stream on descriptor ``fd`` (2) that writes at once and never raises for a write
    the descriptor refuses: that text is dropped. ``encoding`` is the interpreter's stderr's."""

    def __init__(self, fd: int = 2, encoding: str = "utf-8") -> None:
        super().__init__()
        self._fd = fd
        self._encoding = encoding

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def errors(self) -> str:
        return "backslashreplace"

    def write(self, text: str) -> int:
        """Write ``text`` whole, or as much as the descriptor takes; returns ``len(text)``."""
        data = memoryview(text.encode(self._encoding, "backslashreplace"))
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError:
            pass  # a closed reader, a full disk: the message is lost, the run goes on
        return len(text)

    def flush(self) -> None:
        """Nothing is held back."""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        try:
            return os.isatty(self._fd)
        except OSError:
            return False


def take_closed_descriptors() -> None:
    """Open /dev/null on each of descriptors 0, 1 and 2 that is closed (see the module)."""
    for fd, mode in _NULL_MODES.items():  # in order: those below fd are open by now
        try:
            os.fstat(fd)
        except OSError:
            # open() takes the lowest free number, which is fd; inherited, as the closed one was
            os.set_inheritable(os.open(os.devnull, mode), True)


def steady_standard_streams() -> None:
    """Make a closed, broken or full stderr harmless to this process (see the module): closed
    standard descriptors taken, and ``sys.stderr`` a :class:`DroppingStderr`."""
    take_closed_descriptors()
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr = DroppingStderr(2, encoding)
