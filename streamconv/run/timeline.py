"""Each written frame's place in a run, for the report's timeline: when its read began, and where
frames were dropped or damage found; the last ``cap`` frames only, so a live run's record stays
bounded. The frames' stage times are RunStats' raw samples (``samples_ms``), kept alike."""

from __future__ import annotations

import math
from array import array
from collections import deque


class FrameTimeline:
    """When each of the last ``cap`` written frames began to be read (a ring of floats, host
    memory), and the frames at which the counts of dropped frames or damage changed (at most
    ``cap`` such events): 8 bytes a frame, and about 100 an event.

    Attributes:
        count: frames recorded in all.
        cap: frames kept.
    """

    __slots__ = ("_at", "_events", "_last", "_next", "cap", "count")

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"timeline cap must be >= 1, got {cap}")
        self.count = 0
        self.cap = cap
        self._at = array("d")  # seconds from the run's first read (NaN: not known)
        self._next = 0  # once full, the oldest entry's place
        self._events: deque[tuple[int, int, int]] = deque(maxlen=cap)  # (frame, dropped, damaged)
        self._last = (0, 0)  # the counts of the last event

    def add(self, at: float | None = None, dropped: int = 0, damaged: int = 0) -> None:
        """Record one written frame: when its read began (seconds from the run's first read)
        and the frames dropped and damage seen so far, in all."""
        self._keep(math.nan if at is None else at)
        if (dropped, damaged) != self._last:
            self._events.append((self.count, dropped, damaged))
            self._last = (dropped, damaged)
        self.count += 1

    def _keep(self, at: float) -> None:
        """Put a frame's start in the ring, over the oldest once full."""
        if len(self._at) < self.cap:
            self._at.append(at)
        else:
            self._at[self._next] = at
            self._next = (self._next + 1) % self.cap

    def merge(self, other: FrameTimeline) -> None:
        """Append another record (another segment's): its frames after this one's, its counts
        added to this one's; the last ``cap`` frames of both kept."""
        base, (dropped, damaged) = self.count, self._last
        for index in other._order():
            self._keep(other._at[index])
        self._events.extend((base + frame, dropped + d, damaged + g)
                            for frame, d, g in other._events)
        self._last = (dropped + other._last[0], damaged + other._last[1])
        self.count = base + other.count

    def _order(self) -> list[int]:
        """The ring's indices, oldest first."""
        held = len(self._at)
        return [(self._next + k) % held for k in range(held)]

    def to_dict(self) -> dict:
        """JSON-ready: ``first_frame`` (the number, from 0, of the first frame held),
        ``start_s`` (when each frame held began to be read, oldest first, to the microsecond;
        null where not known) and ``events`` ([frame, dropped, damaged]: from that frame on,
        the counts of frames dropped and of damage found, in all)."""
        at = self._at
        return {"first_frame": self.count - len(at),
                "start_s": [None if math.isnan(at[i]) else round(at[i], 6) for i in self._order()],
                "events": [list(event) for event in self._events]}
