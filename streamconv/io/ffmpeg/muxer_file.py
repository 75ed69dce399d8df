"""The file object a muxer writes through PyAV: a failed write or seek comes back to FFmpeg as
its error code, never as a Python exception.

PyAV calls a Python file's ``write`` and ``seek`` from FFmpeg's I/O callbacks and keeps an
exception raised there until the FFmpeg call returns. A muxer that carries on after a failed
write (a full disk) and seeks, as MP4's trailer does (its index, ``+faststart``'s move), makes a
second one, and PyAV prints the first with its traceback ("PyAV library exception being
dropped: ... pyio_seek_gil ... OSError") before raising the second. Answered with a negative
errno, the failure is FFmpeg's own: it marks the output failed, and the call that wrote
(``mux``, the trailer) raises once, with that errno (ENOSPC: "No space left on device").
"""

from __future__ import annotations

import errno
import io
from typing import BinaryIO


class MuxerFile:
    """``file`` (a binary file opened for writing, host) as PyAV's muxer uses it: ``write`` and
    ``seek`` return ``-errno`` where ``file`` raises OSError, and keep returning it after the
    first failure without touching ``file`` again (what it holds is discarded). ``name`` is
    ``file``'s, from which PyAV picks the container. Closing is left to ``file``'s owner."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.error: OSError | None = None  # the first failure

    @property
    def name(self) -> str:
        return self._file.name

    @property
    def closed(self) -> bool:
        return self._file.closed

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._file.seekable()

    def tell(self) -> int:
        return self._file.tell()

    def write(self, data: bytes) -> int:
        """Write ``data``: its length, or ``-errno``."""
        if self.error is None:
            try:
                self._file.write(data)
                return len(data)
            except OSError as exc:
                self.error = exc
        return self._code()

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move to ``offset`` (flushing what is buffered): the new position, or ``-errno``."""
        if self.error is None:
            try:
                return self._file.seek(offset, whence)
            except OSError as exc:
                self.error = exc
        return self._code()

    def _code(self) -> int:
        return -(self.error.errno or errno.EIO)


def muxer_target(target: BinaryIO | object) -> MuxerFile | object:
    """What ``av.open`` is given for a target's ``create()``: a regular file's handle wrapped in
    :class:`MuxerFile`; a URL (a pipe, a network output) or another object as it is."""
    return MuxerFile(target) if isinstance(target, io.BufferedWriter) else target
