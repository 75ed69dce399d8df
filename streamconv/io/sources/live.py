"""Live sources: frames that arrive on their own clock and are never queued.

A producer thread (a camera, or the synthetic clock of streamconv.io.sources.pattern.LivePattern)
writes each new frame into a back buffer, stamps it with ``time.perf_counter()`` and swaps
it with the newest frame. ``read_into`` copies the newest frame into the pipeline's slot. A
frame replaced before the pipeline took it is dropped and counted, so a pipeline that falls
behind gets fresh frames, not a backlog, and latency stays bounded by the ring.

While the pipeline waits in ``read_into``, its slot buffer (page-locked on the CUDA backend)
is lent to the producer, which captures the next frame straight into it: no copy on the
latency path, which keeps up with the camera (the usual case). The copy is only for frames
that arrive while the pipeline is busy.

RealtimeSource paces a file (or any non-live source) at its frame rate, for watching.
"""

from __future__ import annotations

import logging
import threading
import time
from fractions import Fraction

import numpy as np

from ...errors import FrameFormatError, StreamError
from ...frames.hostcopy import ParallelCopier
from ...frames.slots import RESIZED, FrameMeta
from .source import Source

log = logging.getLogger(__name__)

LIVE_TIME_BASE = Fraction(1, 1000)
"""Live frames carry pts in milliseconds since the first frame taken, so recordings keep real
timing."""


class LiveSource(Source):
    """Base of sources that produce frames on their own thread with the newest-frame policy.

    Subclasses set ``width``, ``height``, ``frame_rate``, call :meth:`_start` at the end of
    their constructor, and implement :meth:`_produce`, which loops until :attr:`stopping`:
    write a frame into the buffer :meth:`_capture_buffer` returns ((H, W, 3) uint8 RGB host
    array), then call :meth:`_publish` with its capture time and that buffer. Returning ends
    the stream; raising ends it with that error, raised by the next ``read_into`` once the
    frames before it are taken.

    Attributes:
        dropped: frames replaced by a newer one before the pipeline took them (counted from
            the first frame taken, so start-up time is not a drop).
        delivered: frames handed to the pipeline.
        in_place: of those, frames captured straight into the pipeline's buffer (no copy).
        hang_timeout: seconds ``read_into`` waits while the producer makes no progress at
            all (a driver call that never returns) before raising.
    """

    is_live = True
    time_base = LIVE_TIME_BASE
    hang_timeout = 10.0
    # threads copying a frame into the slot (None: ParallelCopier's choice)
    copy_workers: int | None = None

    def _start(self) -> None:
        shape = self.shape
        self._back = np.zeros(shape, np.uint8)
        self._front = np.zeros(shape, np.uint8)
        self._front_time = 0.0
        self._lock = threading.Condition()
        self._sequence = 0       # frames published
        self._taken = 0          # sequence number of the last frame taken
        self._first_taken: float | None = None
        self._last_pts = -1
        self._ended = False
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._interrupt = threading.Event()
        self._heartbeat = time.perf_counter()
        self._lent: np.ndarray | None = None  # the buffer of a read_into waiting for a frame
        self._claimed = False  # the producer is capturing into _lent
        self._in_place = 0  # sequence number of the last frame captured into a lent buffer
        self.dropped = 0
        self.delivered = 0
        self.in_place = 0
        # The copy into the slot is on every frame's latency path: large frames go in bands.
        self._copier = ParallelCopier(self.copy_workers) if self.copy_workers != 1 else None
        self._thread = threading.Thread(target=self._run, name=f"streamconv-{self.name}",
                                        daemon=True)
        self._thread.start()

    @property
    def stopping(self) -> bool:
        """True once close() was called: the producer should return."""
        stop = getattr(self, "_stop", None)  # None while a subclass constructor is still opening
        return stop is not None and stop.is_set()

    def _produce(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # handed to the reader thread, which raises it
            self._error = exc
        finally:
            with self._lock:
                self._ended = True
                self._claimed = False  # nothing writes into a lent buffer any more
                self._lock.notify_all()

    def _beat(self) -> None:
        """Tell the watchdog the producer is alive (call after every device read, good or bad)."""
        self._heartbeat = time.perf_counter()

    def _capture_buffer(self) -> np.ndarray:
        """Where to capture the next frame: the buffer of a ``read_into`` waiting for one (no
        copy later), else the back buffer. Pass it to :meth:`_publish` (or :meth:`_abandon`)."""
        with self._lock:
            if self._lent is not None and not self._claimed and self._sequence == self._taken:
                self._claimed = True
                return self._lent
            return self._back

    def _abandon(self, buffer: np.ndarray) -> None:
        """Give back a buffer from :meth:`_capture_buffer` without publishing (a failed read)."""
        with self._lock:
            if buffer is self._lent:
                self._claimed = False
                self._lock.notify_all()

    def _publish(self, captured: float, buffer: np.ndarray | None = None) -> None:
        """Make ``buffer`` (from :meth:`_capture_buffer`; None: the back buffer) the newest frame,
        captured at ``captured`` (perf_counter seconds)."""
        with self._lock:
            if buffer is not None and buffer is not self._back and buffer is not self._lent:
                self._claimed = False
                return  # its reader gave up waiting (a hang was reported): nobody wants the frame
            if self._sequence > self._taken and self._first_taken is not None:
                self.dropped += 1  # the previous frame was never taken: it is stale now
            if buffer is not None and buffer is self._lent and self._claimed:
                self._in_place = self._sequence + 1  # already where the reader wants it
                self._claimed = False
            else:
                self._back, self._front = self._front, self._back
            self._front_time = captured
            self._sequence += 1
            self._heartbeat = time.perf_counter()
            self._lock.notify_all()

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless closed meanwhile; returns False if the source is closing."""
        return not self._stop.wait(max(0.0, seconds))

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Wait for a frame newer than the last one taken and copy it into ``buffer``.

        Args:
            buffer: (H, W, 3) uint8 host array.

        Returns:
            FrameMeta with ``captured`` set, pts in ms since the first frame taken; None
            once the stream ended or :meth:`interrupt` was called.

        Raises:
            StreamconvError: the producer's error (e.g. CameraLostError), after the frames
                before it.
            StreamError: the producer made no progress for ``hang_timeout`` seconds.
        """
        if buffer.shape != self.shape:
            raise FrameFormatError(f"unexpected buffer shape: {buffer.shape} != {self.shape}")
        with self._lock:
            self._lent, self._claimed = buffer, False  # the producer may capture straight into it
            try:
                while self._sequence == self._taken:
                    silent = time.perf_counter() - self._heartbeat
                    if silent > self.hang_timeout:
                        raise self._hang_error(silent)
                    if not self._claimed:  # while claimed, the producer writes into buffer: wait
                        if self._interrupt.is_set():
                            return None
                        if self._ended:
                            if self._error is not None:
                                raise self._error
                            return None
                    self._lock.wait(0.1)
            finally:
                self._lent = None
            if self._interrupt.is_set():
                return None
            if self._in_place == self._sequence:
                self.in_place += 1
            elif self._copier is not None:
                self._copier.copy(buffer, self._front)
            else:
                np.copyto(buffer, self._front)
            captured = self._front_time
            self._taken = self._sequence
            if self._first_taken is None:
                self._first_taken = captured
        index = self.delivered
        self.delivered += 1
        return FrameMeta(index, self._pts_of(captured), self.time_base, captured)

    def _pts_of(self, captured: float) -> int:
        """The pts of a frame captured at ``captured`` (perf_counter seconds), in ms since the
        first frame taken. Two frames read within one tick (a camera's burst after a stall)
        would share a pts, which no muxer accepts: each gets at least the tick after the last."""
        assert self._first_taken is not None
        pts = max(round((captured - self._first_taken) / float(self.time_base)), self._last_pts + 1)
        self._last_pts = pts
        return pts

    def _hang_error(self, seconds: float) -> BaseException:
        return StreamError(f"{self.describe()}: no progress for {seconds:.1f} s")

    def interrupt(self) -> None:
        """Make a waiting (and every later) ``read_into`` return None; safe from any thread."""
        self._interrupt.set()

    def close(self) -> None:
        """Stop the producer thread and release the device; safe to call more than once."""
        if not hasattr(self, "_stop"):
            self._release()
            return
        self._stop.set()
        self._interrupt.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=3.0)
            if self._thread.is_alive():
                log.warning("%s: the capture thread did not stop within 3 s", self.name)
        if self._copier is not None:
            self._copier.close()
        self._release()

    def _release(self) -> None:
        """Free the device (subclasses); called once the producer stopped."""


class RealtimeSource(Source):
    """Delivers another source's frames no faster than its timestamps, as if they were live.

    Args:
        inner: a non-live Source (a file, a test pattern); closed with this one.

    Frames are the inner source's, unchanged; each FrameMeta gets ``captured`` = the time
    the frame became due, so latency excludes the wait. Other attributes (``path``,
    ``decode_errors``, ``other_streams``) are the inner source's.
    """

    name = "realtime"

    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.width, self.height, self.channels = inner.width, inner.height, inner.channels
        self.dtype = inner.dtype
        self.frame_rate, self.time_base = inner.frame_rate, inner.time_base
        self.frame_count = inner.frame_count
        self._start: float | None = None
        self._first_seconds = 0.0
        self._interrupt = threading.Event()

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet: avoid recursing during construction
            raise AttributeError(name)
        return getattr(self.inner, name)

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Read the next inner frame into ``buffer`` ((H, W, C) host array of ``dtype``), then
        wait until it is due."""
        if self._interrupt.is_set():
            return None
        meta = self.inner.read_into(buffer)
        if meta is None:
            return None
        if meta is RESIZED:
            self.width, self.height = self.inner.width, self.inner.height
            return meta
        if meta.pts is not None and meta.time_base is not None:
            seconds = float(meta.pts * meta.time_base)
        else:
            seconds = meta.index / float(self.frame_rate)
        now = time.perf_counter()
        if self._start is None:
            self._start, self._first_seconds = now, seconds
        due = self._start + (seconds - self._first_seconds)
        if self._interrupt.wait(max(0.0, due - now)):
            return None
        meta.captured = time.perf_counter()
        return meta

    def interrupt(self) -> None:
        """Make a waiting (and every later) ``read_into`` return None; safe from any thread."""
        self._interrupt.set()
        self.inner.interrupt()  # a read blocked in the inner source delivers nothing either

    def describe(self) -> str:
        return f"{self.inner.describe()} (real time)"

    def close(self) -> None:
        self.inner.close()
