"""A one-line progress bar on a terminal's stderr, for runs of known length."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """Redraws ``[#####.....]  120/300  40%  57.1 fps  ETA 3s`` at most ``rate`` times a second.

    Args:
        total: expected number of frames (None: show the count and fps only).
        stream: where to draw (default stderr); nothing is drawn unless it is a terminal.
        enabled: force on or off; None means "if ``stream`` is a terminal".
    """

    def __init__(self, total: int | None, *, stream: TextIO | None = None,
                 enabled: bool | None = None, rate: float = 8.0) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._interval = 1.0 / rate
        self._start = time.perf_counter()
        self._last_draw = 0.0
        self.count = 0

    def update(self, count: int) -> None:
        """Set the number of frames done; redraws if enough time has passed."""
        self.count = count
        now = time.perf_counter()
        if self.enabled and now - self._last_draw >= self._interval:
            self._last_draw = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        fps = self.count / elapsed
        if self.total:
            done = min(self.count / self.total, 1.0)
            filled = int(30 * done)
            eta = (self.total - self.count) / fps if fps > 0 else 0.0
            text = (f"[{'#' * filled}{'.' * (30 - filled)}] {self.count}/{self.total} "
                    f"{100 * done:3.0f}% {fps:6.1f} fps ETA {eta:4.0f}s")
        else:
            text = f"{self.count} frames {fps:6.1f} fps"
        self.stream.write("\r" + text)
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
