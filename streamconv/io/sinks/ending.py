"""The end of a file sink's output: finished and published whole, or removed when a write fails
or the run is aborted (the base class of :class:`streamconv.io.sinks.file.FileSink`, whose
attributes these methods use)."""

from __future__ import annotations

import av

from ...errors import OutputError, StreamError
from .sink import Sink


class FileEnding(Sink):
    """How a :class:`streamconv.io.sinks.file.FileSink` ends: :meth:`_finish` flushes the encoder
    and publishes the file; a failed write (:meth:`_raise_write_error`) or :meth:`abort` removes
    it."""

    def _raise_write_error(self, exc: BaseException, doing: str) -> None:
        """Raise the error of a failed encode or write. A full disk (any OS-level write error)
        is an OutputError saying how much was written; the incomplete file is removed at once,
        to give the space back, and the sink is marked ``failed``."""
        # an image's name taken meanwhile, a second frame for one image
        if isinstance(exc, OutputError):
            self.failed = True
            self.abort(keep_finished=True)
            raise exc
        if not isinstance(exc, OSError) or exc.errno is None:
            raise StreamError(f"{doing} to {self.path} failed: {exc}") from None
        try:
            written = self._file.temp.stat().st_size if self._file.temp else 0
        except OSError:
            written = 0
        self.failed = True
        self.abort(keep_finished=True)
        if self._file.published_as_written:  # a pipe, a sequence or a URL: no temporary file
            done = self._file.images_finished if self._images else self.frames_written
            kept = f"; the {done} images finished are kept" if self._images and done else ""
            raise OutputError(f"writing {self.path} failed after {done} frames: "
                              f"{exc.strerror or exc}{kept}") from None
        raise OutputError(
            f"writing {self.path} failed after {self.frames_written} frames "
            f"({written / 2**20:.1f} MiB written): {exc.strerror or exc}; the incomplete file "
            f"was removed"
            f"{'' if not self.path.exists() else ' and the existing output left as it was'}"
        ) from None

    def _finish(self) -> None:
        """Flush, write the trailer and publish (the container is held the whole time)."""
        with self._busy:
            if self._container is None:  # aborted meanwhile
                return
            try:
                for packet in self._stream.encode(None):
                    self._write_packet(packet)
                self._container.close()
                self._copies.close()
            except (av.FFmpegError, OSError) as exc:
                self._raise_write_error(exc, "finishing the file")  # (an abort closes the copies)
            self._container = None
            if self.frames_written == 0:
                self._file.discard()
                raise StreamError(f"no frames were written; {self.path} not created")
            self._file.publish()

    def abort(self, *, keep_finished: bool = False) -> None:
        """Drop the partial file; the output path is left as it was. Safe from another thread
        while a frame is encoded or the file finished: the container is then left to that
        thread, and only the file is removed. ``keep_finished``: an image sequence keeps the
        images already finished (after a failure mid-run), removing only a half-written one."""
        self._closed = True
        if self._busy.acquire(blocking=False):
            try:
                if self._container is not None:
                    container, self._container = self._container, None
                    try:
                        container.close()
                    except (av.FFmpegError, OSError, ValueError):
                        pass
                if self._copies is not None:
                    self._copies.close()
            finally:
                self._busy.release()
        if self._images:
            self._file.discard(keep_finished=keep_finished)
        else:
            self._file.discard()
