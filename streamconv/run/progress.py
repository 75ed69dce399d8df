"""One-line progress on a terminal's stderr: a bar for runs of known length, a status line for live
runs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import numpy as np


def is_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is an open terminal: False for None (``sys.stderr`` of a process
    started with descriptor 2 closed) or a closed stream."""
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


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
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
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


class StatusLine:
    """Redraws ``12 s 29.9 fps 360 frames 0 dropped | read 1.1/1.9 kernel ... latency 4.0/5.2 ms``
    about once a second: fps, drops, and per-stage p50/p95 over the frames since the last draw.

    Args:
        stats: the RunStats the writer thread records into (read from that same thread).
        stream: where to draw (default stderr); nothing is drawn unless it is a terminal.
        enabled: force on or off; None means "if ``stream`` is a terminal".
        interval: seconds between redraws.

    Has ProgressBar's interface (``update(count)``, ``close()``), so the pipeline drives either.
    """

    STAGES = ("read", "upload", "kernel", "download", "write", "latency")

    def __init__(self, stats, *, stream: TextIO | None = None, enabled: bool | None = None,
                 interval: float = 1.0) -> None:
        self.stats = stats
        self.stream = stream or sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self._interval = interval
        self._start = time.perf_counter()
        self._last_draw = self._start
        self._last_frames = 0
        self._width = 0

    def update(self, count: int) -> None:
        """Called after each frame; redraws when ``interval`` has passed."""
        now = time.perf_counter()
        if self.enabled and now - self._last_draw >= self._interval:
            self._draw(now)

    def text(self, now: float | None = None) -> str:
        """The status line for the frames recorded since the previous call."""
        now = time.perf_counter() if now is None else now
        stats = self.stats
        new = stats.frames - self._last_frames
        fps = new / max(now - self._last_draw, 1e-9)
        parts = [f"{now - self._start:5.0f} s {fps:6.1f} fps {stats.frames:6d} frames "
                 f"{stats.dropped} dropped"]
        stages = []
        for stage in self.STAGES:
            values = stats.samples.get(stage) or []
            recent = values[-new:] if new > 0 else []
            if recent:
                p50, p95 = np.percentile(np.asarray(recent) * 1e3, (50, 95))
                stages.append(f"{stage} {p50:.1f}/{p95:.1f}")
        if stages:
            parts.append(" ".join(stages) + " ms p50/p95")
        self._last_draw, self._last_frames = now, stats.frames
        return " | ".join(parts)

    def _draw(self, now: float) -> None:
        text = self.text(now)
        pad = max(0, self._width - len(text))  # blank out the tail of a longer previous line
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        """End the line (the summary table follows)."""
        if self.enabled and self._width:
            self.stream.write("\n")
            self.stream.flush()
