"""StreamFilter's side of chains with stages across frames: the slots that carry no output while
a window fills, and the flush that puts out the last frames.

A temporal chain puts out frame i's result with frame ``i + delay``'s submit
(:class:`streamconv.run.inflight.InFlight` moves each frame's note onto the slot that carries it),
so results still come out in order, one per frame, ``delay`` frames later; :meth:`flush` (and the
end of a ``map()``) ends the stream and puts out the rest.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from .filter import output_like
from ..frames.slots import Slot
from ..run.inflight import InFlight


class WindowedResults:
    """Mixed into :class:`streamconv.StreamFilter`: what its ring does about frames that come out
    later than they went in."""

    _in_flight: InFlight
    _free: list[Slot]
    _ready: deque
    _engine: Any
    _leased: dict[int, np.ndarray]

    if TYPE_CHECKING:  # StreamFilter's own
        def _take_over(self, call: str) -> None: ...  # noqa: E704
        def _take_slot(self) -> Slot: ...  # noqa: E704
        def _collect(self, slot: Slot, shape: Any,  # noqa: E704
                     out: np.ndarray | None) -> np.ndarray: ...

    def _queue(self, slot: Slot, shape: tuple[int, ...] | None) -> bool:
        """Put a filled slot (a frame of the caller's ``shape``; None: the next output a temporal
        chain still owes) in flight, its result going straight into a leased page-locked frame
        where the backend offers one (then result() copies nothing); False when no output was
        owed."""
        route = getattr(self._engine, "route_output", None)
        leased = route(slot) if route is not None else None
        if leased is not None:
            self._leased[slot.index] = leased
        if shape is not None:  # noted with its result's shape (a scale stage changes it)
            self._in_flight.submit(slot, output_like(self._engine, shape))
        return shape is not None or self._in_flight.flush(slot)

    def flush(self) -> None:
        """End the stream: the frames a temporal chain still holds (its last ``delay``) are
        filtered, the frames past the last taken as the last, and their results come out of
        result() in order; the next frame submitted starts a new stream. Nothing to do for a
        chain without stages across frames (every result is on its way already).

        Raises:
            StreamError: the StreamFilter is closed.
        """
        self._take_over("flush")
        self._flush_tail()

    def _flush_tail(self) -> None:
        """Queue every output still owed, each into a slot of its own; the next frame starts a
        new stream."""
        if not self._in_flight.unflushed:
            # A chain of causal stages owes nothing (delay 0) but holds the frames before: the
            # backend forgets them only when told (the last flushed output tells it otherwise).
            self._in_flight.end_stream()
            return
        while self._in_flight.unflushed:
            slot = self._take_slot()
            if not self._queue(slot, None):
                self._free.append(slot)

    def _finish_oldest(self) -> None:
        """Wait for the oldest frame in flight and keep its output for result()."""
        self._skip_silent()
        if self._in_flight:
            slot, shape = self._in_flight.retire()
            self._ready.append(self._collect(slot, shape, None))

    def _skip_silent(self) -> None:
        """Free the oldest slots that carry no output (a temporal chain filling its window)."""
        while self._in_flight and not self._in_flight.oldest[0].has_output:
            self._free.append(self._in_flight.retire()[0])
