"""A chain with stages across frames, walked one frame at a time: which frames each temporal stage
holds, when it can emit, and where every stage reads and writes; the same for every backend.

A chain is cut at its temporal stages into 2-D segments: ``segment 0 -> temporal 0 -> segment 1
-> temporal 1 -> ... -> last segment``. Each temporal stage keeps its input frames in a ring
of ``T + 1`` entries (one more than the window, so that the next frame can be written while the
last output still reads the oldest). A centred stage emits output t once its input t + T//2 has
arrived (a causal one at once); at the end of the stream it emits the rest with the frames past
the last taken as the last. Each emitted frame runs through the next segment into the next
stage's ring, or into the slot's output. So a chain of stages with look-aheads a_1, a_2, ...
is ``delay = sum a_i`` frames behind its input, and a stream of N frames gives N outputs:
``max(0, N - delay)`` as frames arrive and the rest from :meth:`TemporalWalk.flush`.

The backend runs the steps through a :class:`Steps` of its own (host arrays or device buffers);
this module decides them and holds no frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from ..errors import FilterSpecError
from ..chain.filters import FilterStage
from ..chain.temporal import TemporalTaps


@dataclass(frozen=True)
class Buffer:
    """Where a step reads or writes: the slot's ``input`` frame, its ``output`` frame, its
    ``work`` frame (a temporal stage's output before the 2-D segment after it), or entry
    ``entry`` of temporal stage ``stage``'s ring."""

    kind: str
    stage: int = 0
    entry: int = 0


INPUT, OUTPUT, WORK = Buffer("input"), Buffer("output"), Buffer("work")


class Steps(Protocol):
    """A backend's way of running the walk's steps on one slot's frames."""

    def segment(self, number: int, source: Buffer, target: Buffer) -> None:
        """Run the 2-D stages of segment ``number`` (never empty) from ``source`` into
        ``target``."""

    def temporal(self, number: int, entries: Sequence[int], target: Buffer) -> None:
        """Run temporal stage ``number`` on its ring entries ``entries`` (one per window position
        of ``TemporalTaps.used``, in order) into ``target``."""


@dataclass
class Window:
    """One temporal stage's place in the stream: frames received, outputs emitted, whether its
    input has ended."""

    taps: TemporalTaps
    received: int = 0
    emitted: int = 0
    ended: bool = False

    @property
    def capacity(self) -> int:
        """Ring entries: the window and one more."""
        return self.taps.frames + 1

    @property
    def ready(self) -> bool:
        """Whether the next output has every frame it reads (or the input has ended)."""
        if self.emitted >= self.received:
            return False
        return self.ended or self.emitted + self.taps.lookahead < self.received

    @property
    def exhausted(self) -> bool:
        """The input has ended and every output is out."""
        return self.ended and self.emitted >= self.received

    def sources(self, output: int) -> list[int]:
        """Ring entries of the frames output ``output`` reads, one per used window position: frame
        ``output + k - lookbehind``, taken as the first or the last frame beyond the stream."""
        first = output - self.taps.lookbehind
        return [min(max(first + k, 0), self.received - 1) % self.capacity for k in self.taps.used]


def split_chain(filters: Sequence[FilterStage]
                ) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """(segments, temporal): the indices of the 2-D stages of each segment (one more segment than
    temporal stages, any of them empty) and of the temporal stages, in chain order."""
    segments: list[list[int]] = [[]]
    temporal = []
    for number, stage in enumerate(filters):
        if stage.temporal is not None:
            temporal.append(number)
            segments.append([])
        else:
            segments[-1].append(number)
    return tuple(tuple(s) for s in segments), tuple(temporal)


def chain_delay(filters: Sequence[FilterStage]) -> int:
    """Frames a chain's output lags its input: the sum of its temporal stages' look-aheads."""
    return sum(stage.temporal.lookahead for stage in filters if stage.temporal is not None)


def chain_context(filters: Sequence[FilterStage]) -> tuple[int, int]:
    """(frames before, frames after) that a chain's output frame depends on: the sum of its
    temporal stages' look-behinds, and its delay; (0, 0) for a chain of 2-D stages."""
    behind = sum(stage.temporal.lookbehind for stage in filters if stage.temporal is not None)
    return behind, chain_delay(filters)


class TemporalWalk:
    """The walk of one stream through a chain with temporal stages.

    Args:
        filters: the chain; at least one stage has ``temporal`` taps.
    """

    def __init__(self, filters: Sequence[FilterStage]) -> None:
        if any(stage.geometry is not None for stage in filters):  # every ring holds one size
            raise FilterSpecError("scale and crop do not go in a chain with stages across frames "
                                  "(yet): run them in a chain of their own")
        self.segments, _ = split_chain(filters)
        self.taps = tuple(stage.temporal for stage in filters if stage.temporal is not None)
        self.windows = [Window(taps) for taps in self.taps]
        self.delay = chain_delay(filters)

    def restart(self) -> None:
        """Forget the stream: the next frame is the first of a new one."""
        self.windows = [Window(taps) for taps in self.taps]

    def input_target(self) -> Buffer:
        """Where the next frame must be put: the slot's input, or (no 2-D stage before the first
        temporal one) straight into that stage's ring."""
        if self.segments[0]:
            return INPUT
        window = self.windows[0]
        return Buffer("ring", 0, window.received % window.capacity)

    def push(self, steps: Steps) -> bool:
        """Take the frame now at :meth:`input_target` and run what it makes ready; True if an
        output went to ``OUTPUT``."""
        window = self.windows[0]
        if self.segments[0]:
            steps.segment(0, INPUT, Buffer("ring", 0, window.received % window.capacity))
        window.received += 1
        return self._emit(steps)

    def flush(self, steps: Steps) -> bool:
        """The input has ended: emit the next output still owed into ``OUTPUT`` (True), or, with
        none left, restart for a new stream (False)."""
        self.windows[0].ended = True
        while True:
            self._propagate_end()
            if self._emit(steps):
                if all(window.exhausted for window in self.windows):
                    self.restart()
                return True
            if all(window.exhausted for window in self.windows):
                self.restart()
                return False

    def _propagate_end(self) -> None:
        for upstream, downstream in zip(self.windows, self.windows[1:]):
            if upstream.exhausted:
                downstream.ended = True

    def _emit(self, steps: Steps) -> bool:
        """Emit from the first ready stage down the chain as far as each next one is ready; True
        if the last stage emitted."""
        number = next((n for n, window in enumerate(self.windows) if window.ready), None)
        while number is not None:
            window = self.windows[number]
            output = window.emitted
            window.emitted += 1
            last = number == len(self.windows) - 1
            onward = self._into(number + 1)
            if self.segments[number + 1]:  # 2-D stages between: through the slot's work frame
                steps.temporal(number, window.sources(output), WORK)
                steps.segment(number + 1, WORK, onward)
            else:
                steps.temporal(number, window.sources(output), onward)
            if last:
                return True
            self.windows[number + 1].received += 1
            if window.exhausted:
                self.windows[number + 1].ended = True
            number = number + 1 if self.windows[number + 1].ready else None
        return False

    def _into(self, number: int) -> Buffer:
        """The ring entry of temporal stage ``number`` that its next input goes to; ``OUTPUT``
        past the last stage."""
        if number >= len(self.windows):
            return OUTPUT
        window = self.windows[number]
        return Buffer("ring", number, window.received % window.capacity)
