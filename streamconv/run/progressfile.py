"""Machine-readable progress (``--progress``): FFmpeg's ``-progress`` blocks of key=value lines.

A block, written whole and flushed about every 0.5 s while the run goes, frames or not (a
stalled input shows as a frame count that stands still), and once more with ``progress=end``
when the run is over (the output final, or the run failed: the exit code
says which)::

    frame=120
    fps=57.12
    out_time_us=4800000
    out_time_ms=4800000
    out_time=00:00:04.800000
    drop_frames=0
    dropped=0
    speed=2.29x
    progress=continue

``out_time`` is the video written so far (frames / frame rate); ``out_time_ms`` repeats
``out_time_us``, as FFmpeg writes it; ``dropped`` and FFmpeg's ``drop_frames`` are the frames a
live source dropped.

Where it goes: ``-`` (or ``pipe:1``) is standard output; a FIFO, a terminal or another character
device (``/dev/stderr``) is written into; a regular file is written in place as the run goes,
not published whole (it is meant to be read while it grows, with ``tail -f``), with the other
outputs' protections: never an input or another file of the run, and an existing file is
refused without ``overwrite`` (with it, it is removed and a new one created, so a link is
replaced, its target untouched).

Progress never holds up the frames: a block that a FIFO's or pipe's reader has no room for yet
is left out (the next one says where the run is); the last block waits up to ``END_WAIT``
seconds for room. A FIFO with no reader yet is waited for, as FFmpeg does, with a word on
standard error (Ctrl-C stops the wait).
"""

from __future__ import annotations

import errno
import io
import logging
import os
import select
import stat
import sys
import threading
import time
from typing import Iterable, TextIO

from ..frames.arguments import check_path
from ..errors import OutputError
from ..files.publish import check_output_path

log = logging.getLogger(__name__)

INTERVAL = 0.5
"""Seconds between blocks while the run goes."""

END_WAIT = 5.0
"""Seconds the last block (``progress=end``) waits for a reader that has fallen behind."""


def _is_stdout(target: str | os.PathLike) -> bool:
    return os.fspath(target) in ("-", "pipe:1", "pipe:")


def _is_stream_device(target: str | os.PathLike) -> bool:
    """A FIFO or character device (a terminal, /dev/stderr): written into, never replaced."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def check_progress_target(target: str | os.PathLike, *, overwrite: bool = False,
                          protect: Iterable = ()) -> None:
    """Refuse a ``--progress`` file before any work, as :class:`ProgressFile` would.

    Raises:
        OutputError: (exit 6) as :func:`streamconv.files.publish.check_output_path` for a regular
            file.
    """
    if not _is_stdout(target) and not _is_stream_device(target):
        check_output_path(target, overwrite=overwrite, protect=protect, what="--progress")


class ProgressFile:
    """Writes progress blocks to ``target`` (see the module's docstring).

    Args:
        target: a path, ``-`` for standard output, a FIFO or a character device.
        overwrite: replace an existing regular file.
        protect: files it must never be (as for :func:`streamconv.files.publish.check_output_path`).
        interval: seconds between blocks.

    The pipeline calls :meth:`begin` when frames start, :meth:`update` after each frame (from its
    writer thread) and :meth:`close` when the run is over.

    Raises:
        OutputError: (exit 6) the file is refused or cannot be created.
    """

    def __init__(self, target: str | os.PathLike, *, overwrite: bool = False,
                 protect: Iterable = (), interval: float = INTERVAL) -> None:
        check_path(target, "progress_file", OutputError)
        check_progress_target(target, overwrite=overwrite, protect=protect)
        self.target = target
        self._interval = interval
        self._regular = not (_is_stdout(target) or _is_stream_device(target))  # a file of ours
        self._stream, self._own = self._open(target, overwrite)
        self._failed = False
        self._stats = None
        self._rate = 0.0
        self._start = self._last = time.perf_counter()
        self._closed = False
        self._lock = threading.Lock()  # the writer thread's blocks and the ticker's
        self._done = threading.Event()
        self._ticker: threading.Thread | None = None

    @staticmethod
    def _open(target, overwrite: bool) -> tuple[TextIO, bool]:
        """The stream to write, and whether it is this object's to close."""
        if _is_stdout(target):
            return sys.stdout, False
        try:
            if _is_stream_device(target):
                return _open_stream_device(target), True
            if overwrite and os.path.lexists(target):
                os.unlink(target)  # a link is replaced, its target left alone
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW",
                                                                   0) | getattr(os, "O_CLOEXEC", 0)
            return os.fdopen(os.open(target, flags, 0o666), "w", encoding="utf-8"), True
        except OSError as exc:
            raise OutputError(f"cannot write --progress {target}: {exc.strerror or exc}") from None

    def begin(self, stats, frame_rate) -> None:
        """Frames start: ``stats`` (RunStats: ``frames``, ``dropped``) is read for each block;
        ``frame_rate`` (frames per second) turns frames into output time."""
        self._stats = stats
        self._rate = float(frame_rate) or 0.0
        self._start = self._last = time.perf_counter()
        self._ticker = threading.Thread(target=self._tick, name="streamconv-progress", daemon=True)
        self._ticker.start()

    def update(self, count: int) -> None:
        """After each frame written (``count`` so far): a block if ``interval`` has passed."""
        with self._lock:
            now = time.perf_counter()
            if now - self._last >= self._interval:
                self._last = now
                self._write(count, now, "continue")

    def _tick(self) -> None:
        """Between frames (an input that stalls, a slow encoder): a block each ``interval`` too."""
        while not self._done.wait(self._interval / 2):
            self.update(getattr(self._stats, "frames", 0))

    def block(self, count: int, now: float, state: str) -> str:
        """The text of one block for ``count`` frames at ``now`` (perf_counter seconds)."""
        elapsed = max(now - self._start, 1e-9)
        seconds = count / self._rate if self._rate else 0.0
        micros = round(seconds * 1e6)
        dropped = getattr(self._stats, "dropped", 0) or 0
        clock = f"{int(seconds // 3600):02d}:{int(seconds % 3600 // 60):02d}:{seconds % 60:09.6f}"
        return (
            f"frame={count}\nfps={count / elapsed:.2f}\n"
                f"out_time_us={micros}\nout_time_ms={micros}\n"
                f"out_time={clock}\ndrop_frames={dropped}\ndropped={dropped}\n"
                f"speed={seconds / elapsed:.3g}x\nprogress={state}\n")

    def _write(self, count: int, now: float, state: str) -> None:
        if self._failed:
            return
        if not _has_room(self._stream, END_WAIT if state == "end" else 0.0):
            if state == "end":
                log.warning("--progress %s: its reader took nothing for %g s; the last block "
                            "(progress=end) was not written", self.target, END_WAIT)
            return
        try:
            self._stream.write(self.block(count, now, state))
            self._stream.flush()
        except (OSError, ValueError) as exc:
            self._failed = True  # a reader that went away, or a full disk, does not end the run
            reason = getattr(exc, "strerror", None) or exc
            if self._regular:  # but a file that cannot be written whole is not left half-written
                log.warning("--progress %s: %s; no progress is written there, and the file was "
                            "removed",
                            self.target, reason)
                self._remove()
            else:
                log.warning("--progress %s: %s; no more progress is written there", self.target,
                            reason)

    def _remove(self) -> None:
        try:
            self._stream.close()
        except OSError:
            pass
        try:
            os.unlink(self.target)
        except OSError:
            pass

    def close(self) -> None:
        """Write the last block (``progress=end``) and close the file; safe to call again."""
        if self._closed:
            return
        self._closed = True
        self._done.set()
        if self._ticker is not None:
            self._ticker.join()
        self._write(getattr(self._stats, "frames", 0), time.perf_counter(), "end")
        if self._own and not self._failed:
            try:
                self._stream.close()
            except OSError:
                pass

    def alongside(self, display):
        """A progress display that drives ``display`` (the bar or status line) and this file;
        closing it closes the display only (the file's last block waits for the output)."""
        return _Both(display, self)


def _open_stream_device(target: str | os.PathLike) -> TextIO:
    """A FIFO or character device opened to write; a FIFO with no reader yet is waited for,
    with a word, where it used to wait without one."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: a FIFO that no one reads yet
            raise
        log.warning("--progress %s: waiting for a reader of the FIFO (Ctrl-C stops)", target)
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    else:
        os.set_blocking(fd, True)  # whole blocks: room is looked for first (_has_room)
    return os.fdopen(fd, "w", encoding="utf-8")


def _has_room(stream: TextIO, timeout: float) -> bool:
    """Whether a block (far under PIPE_BUF, so written whole or not at all) can be written to
    ``stream`` within ``timeout`` seconds: a FIFO's or pipe's reader can fall behind, and the
    writer thread that calls :meth:`ProgressFile.update` must never wait for it."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return True  # no descriptor to ask (a Python stream in place of stdout), or no poll()
    return bool(poller.poll(timeout * 1000))


class _Both:
    """The bar and the progress file as one display (see :meth:`ProgressFile.alongside`)."""

    def __init__(self, display, progress: ProgressFile) -> None:
        self.display, self.progress = display, progress

    def update(self, count: int) -> None:
        self.display.update(count)
        self.progress.update(count)

    def close(self) -> None:
        self.display.close()
