"""A network input that survives drops: reopened with a growing pause when it stalls or ends.

ReconnectingSource wraps a source made by an opener (a FileSource of a URL). When a read
fails (a stall past the input's timeout is one) or the stream ends (a server that closed the
connection), it closes the source and opens a new one with the pauses of
streamconv.io.sources.backoff, until a frame comes or ``within`` seconds have passed since the loss;
then it raises InputLostError (exit 8) and the frames written so far are kept.

The frames missed while the input was away are counted in ``dropped`` (as a live source's
dropped frames are): from the timestamps where the stream's clock went on during the gap (a
camera or server that kept running), else from the time the input was away. The frames
after a reconnect keep a timeline that continues the one before, the gap included, so an
output's timestamps never go back.
"""

from __future__ import annotations

import logging
import threading
import time
from fractions import Fraction
from typing import Callable

import numpy as np

from ...errors import InputError, InputLostError, StreamError
from ...frames.slots import RESIZED, FrameMeta
from .backoff import Backoff
from .source import Source

log = logging.getLogger(__name__)

RECONNECT_WINDOW = 60.0
"""Seconds a lost input is tried again before the run gives up (``--reconnect-timeout``)."""


class ReconnectingSource(Source):
    """Another source's frames, the source reopened by ``opener`` whenever it stalls or ends.

    Args:
        opener: makes the source (called once here: its errors are raised as they are, so a
            wrong URL fails at once; then again after each loss).
        within: seconds after a loss in which attempts start (0 or None: no limit).
        backoff, max_backoff: the first pause before an attempt and the longest (seconds).

    Frames are the inner source's ((H, W, C) host arrays of ``dtype``, or its planes), with
    indices counted across reconnects and pts on the first source's time base. After a
    reconnect a source of another frame size makes ``read_into`` return ``RESIZED`` first.
    Other attributes (``path``, ``damage``, ``decoder``) are those of the source open now.

    Attributes:
        dropped: frames missed while the input was away (see the module's docstring).
        reconnects: successful reopenings.
    """

    name = "reconnecting"

    def __init__(self, opener: Callable[[], Source], *, within: float | None = RECONNECT_WINDOW,
                 backoff: float = 0.25, max_backoff: float = 4.0) -> None:
        self._opener = opener
        self.inner = opener()
        self.within = within or None
        self.backoff, self.max_backoff = backoff, max_backoff
        self.dropped = 0
        self.reconnects = 0
        self._interrupt = threading.Event()
        self._index = 0
        self._last: float | None = None      # the last frame's time on the output's timeline (s)
        self._last_raw: float | None = None  # the same frame's own time in its session (s)
        self._last_at = 0.0                  # perf_counter when it was read
        self._shift = 0.0                    # added to the session's times (s)
        self._resumed = False                # the next frame is the first after a reconnect
        self._adopt()
        self.time_base = self.inner.time_base
        self.frame_rate = self.inner.frame_rate
        self._period = 1 / float(self.frame_rate)  # seconds a frame: what a gap is counted in

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet: avoid recursing during construction
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _adopt(self) -> bool:
        """Take the inner source's geometry; True if it differs from the one before."""
        inner = self.inner
        before = (getattr(self, "width", None), getattr(self, "height", None),
                  self.__dict__.get("dtype"), self.__dict__.get("planes"))
        self.width, self.height, self.channels = inner.width, inner.height, inner.channels
        self.dtype, self.planes = inner.dtype, inner.planes
        self.frame_count = None  # a stream that may be reopened has no known length
        return before != (self.width, self.height, self.dtype, self.planes)

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Read the next frame into ``buffer`` (host memory, as the inner source takes it),
        reopening the input when it stalls or ends.

        Returns:
            The frame's FrameMeta; ``RESIZED`` when the frame size changed (mid-stream or
            after a reconnect); None once :meth:`interrupt` was called.

        Raises:
            InputLostError: (exit 8) the input could not be reopened within ``within`` seconds.
        """
        while not self._interrupt.is_set():
            try:
                meta = self.inner.read_into(buffer)
                reason = "the stream ended"
            except StreamError as exc:
                meta, reason = None, str(exc)
            if meta is RESIZED:
                self._adopt()
                return RESIZED
            if meta is not None:
                return self._continue(meta)
            if self._interrupt.is_set():
                return None  # the inner source was interrupted too: a stop, not a loss
            if not self._reopen(reason):
                return None
            if self._adopt():
                return RESIZED
        return None

    def _reopen(self, reason: str) -> bool:
        """Close the lost source and open a new one with backoff; False if interrupted meanwhile.

        Raises:
            InputLostError: every attempt within ``within`` seconds failed.
        """
        label = getattr(self.inner, "path", self.inner.describe())
        log.warning("%s: %s after %d frames; reopening", label, reason, self._index)
        self.inner.close()
        # no limit without ``within``
        backoff = Backoff(self.backoff, self.max_backoff, within=self.within)
        for attempt in backoff.pauses(lambda seconds: not self._interrupt.wait(seconds)):
            try:
                self.inner = self._opener()
            except (InputError, StreamError) as exc:
                log.info("%s: reopening (attempt %d) failed: %s", label, attempt, exc)
                continue
            self.reconnects += 1
            self._resumed = True
            log.warning("%s: reopened after %.1f s (attempt %d)", label, backoff.elapsed, attempt)
            return True
        if self._interrupt.is_set():
            return False
        raise InputLostError(f"{label}: {reason} after {self._index} frames, and reopening it "
                             "failed "
                             f"{backoff.attempts_made} times over {backoff.elapsed:.1f} s; giving "
                             "up")

    def _continue(self, meta: FrameMeta) -> FrameMeta:
        """Number the frame on from the ones before and put its pts on the continued timeline;
        count the frames missed before the first frame after a reconnect."""
        now = time.perf_counter()
        raw = float(meta.pts * meta.time_base) if meta.pts is not None and meta.time_base else None
        period = self._period
        if self._resumed:
            self._resumed = False
            if raw is not None and self._last_raw is not None and raw > self._last_raw:
                missed = round((raw - self._last_raw) / period) - 1  # the stream's clock went on
            else:
                missed = round((now - self._last_at) / period) - 1
            self.dropped += max(0, missed)
            if raw is not None and self._last is not None:
                self._shift = self._last + (max(0, missed) + 1) * period - raw
        meta.index = self._index
        self._index += 1
        self._last_at = now
        if raw is None:
            return meta
        self._last_raw, self._last = raw, raw + self._shift
        # else the pts is on the timeline already
        if self._shift or meta.time_base != self.time_base:
            meta.pts = round(Fraction(self._last).limit_denominator(10**9) / self.time_base)
            meta.time_base = self.time_base
        return meta

    def interrupt(self) -> None:
        """Make a waiting (and every later) ``read_into`` return None; safe from any thread."""
        self._interrupt.set()
        self.inner.interrupt()

    def describe(self) -> str:
        return f"{self.inner.describe()} (reconnecting)"

    def close(self) -> None:
        self.inner.close()
