"""The CPU reference for chains with stages across frames: the oracle the GPU is held to.

A temporal stage's output is defined by this straightforward float32 computation (DESIGN
semantics, :mod:`streamconv.chain.temporal`), over the used window positions k in order:

- K = 1: ``acc = f_k0 * w_k0``, then ``acc = acc + f_k * w_k``, each product and each sum
  rounded to float32 (no fused multiply-add), so that a kernel doing the same is bit-exact;
- K > 1: ``acc = S_k0``, then ``acc = acc + S_k``, where S_k is the 2-D reference's float32
  correlation (:func:`streamconv.backends.cpu.backend.correlate`) of frame k with its K x K taps;

then ``rint`` (half to even) and saturation to the frame's range. The 2-D segments around the
temporal stages run on :class:`~streamconv.backends.cpu.backend.CpuBackend` itself, and the walk
(which frame goes where, when) is :mod:`streamconv.backends.temporal_chain`'s, as on the GPU.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ...frames.borders import DEFAULT_BORDER, check_border, pad_frame
from ...errors import FilterSpecError
from ...chain.filters import FilterStage
from ...frames.checks import sample_maximum
from ...frames.yuv import YuvLayout
from ...frames.slots import Slot
from ...chain.temporal import TemporalTaps
from .backend import CpuBackend, convert_colour, correlate
from ..plan import AUTO
from ..protocol import Backend
from ..temporal_chain import Buffer, TemporalWalk


def temporal_sums(frames: Sequence[np.ndarray], taps: TemporalTaps, border: str) -> np.ndarray:
    """The float32 sums of one temporal stage, before rounding.

    Args:
        frames: one (H, W, C) uint8 or uint16 host frame per used window position
            (``taps.used``), in order.
        taps: the stage's taps.
        border: the spatial border mode (streamconv.frames.borders.BORDER_MODES).

    Returns:
        (H, W, C) float32 host array (new).
    """
    used = taps.used
    if not used:
        return np.zeros(frames[0].shape if frames else (0, 0, 1), np.float32)
    if taps.size == 1:
        acc = np.multiply(frames[0], taps.taps[used[0], 0, 0], dtype=np.float32)
        term = np.empty_like(acc)
        for frame, k in zip(frames[1:], used[1:]):
            np.multiply(frame, taps.taps[k, 0, 0], out=term, dtype=np.float32)
            np.add(acc, term, out=acc)
        return acc
    radius = taps.size // 2
    height, width = frames[0].shape[:2]
    acc = None
    for frame, k in zip(frames, used):
        sums = correlate(pad_frame(frame, radius, border), taps.taps[k], height, width)
        acc = sums.copy() if acc is None else np.add(acc, sums, out=acc)
    return acc


def temporal_into(dst: np.ndarray, frames: Sequence[np.ndarray], taps: TemporalTaps,
                  border: str) -> None:
    """Run one temporal stage: ``dst`` ((H, W, C) uint8 or uint16 host array, written) =
    saturate(rint(:func:`temporal_sums`)) in its dtype; 0 where the taps are all zero (no
    window position is used, so ``frames`` is empty and only ``dst`` knows the shape)."""
    if not taps.used:
        dst.fill(0)
        return
    acc = temporal_sums(frames, taps, border)
    np.rint(acc, out=acc)
    np.clip(acc, 0, sample_maximum(dst.dtype), out=acc)
    np.copyto(dst, acc, casting="unsafe")


class TemporalCpuBackend(Backend):
    """Runs a chain with temporal stages on host frames: the CPU backend for such chains.

    Each temporal stage keeps its last ``T + 1`` input frames in host arrays; ``submit`` takes
    one frame in and puts out the frame ``delay`` submissions older (``slot.has_output``
    False while the first ``delay`` frames fill the windows); ``flush`` puts out the rest.

    Args:
        filters: the chain, with at least one temporal stage.
        border: the spatial border mode of every stage.
        kernel: the 2-D stages' kernel, as for :class:`CpuBackend` (``separable`` or the
            reference); the temporal stages run the reference whatever it says.
    """

    name = "cpu"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                 kernel: str = AUTO) -> None:
        self.filters = list(filters)
        self.border = check_border(border)
        self.walk = TemporalWalk(self.filters)
        self.delay = self.walk.delay
        self._segments = [CpuBackend([self.filters[n] for n in numbers], border=self.border,
                                     kernel=kernel)
                          for numbers in self.walk.segments]
        self._rings: list[list[np.ndarray]] = []
        self._frames: dict[str, np.ndarray] = {}  # rgb in / out for planes, and the work frame

    def describe(self) -> str:
        """One line naming the backend, for logs."""
        return self._segments[0].describe()  # (one more segment than temporal stages)

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """``shape``: a chain with stages across frames keeps the frame's size."""
        return tuple(shape)  # type: ignore[return-value]

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None, dtype=np.uint8) -> list[Slot]:
        """Slots as :meth:`CpuBackend.allocate_slots` makes them, and the temporal stages' rings
        of (H, W, C) frames of the frames' sample type."""
        frame_dtype = np.dtype(planes.frame_dtype if planes is not None else dtype)
        for segment in self._segments:
            segment.allocate_slots(shape, 0, dtype=frame_dtype)  # refuses what a segment cannot run
        self._rings = [[np.empty(shape, frame_dtype) for _ in range(window.capacity)]
                       for window in self.walk.windows]
        self._frames = {name: np.empty(shape, frame_dtype)
                        for name in ("rgb_in", "rgb_out", "work")}
        self.walk.restart()
        return CpuBackend([]).allocate_slots(shape, count, planes=planes, dtype=dtype)

    def _buffer(self, slot: Slot, buffer: Buffer) -> np.ndarray:
        """The host frame a walk's buffer names for ``slot``."""
        if buffer.kind == "ring":
            return self._rings[buffer.stage][buffer.entry]
        if buffer.kind == "work":
            return self._frames["work"]
        if slot.planes is not None:
            return self._frames["rgb_in" if buffer.kind == "input" else "rgb_out"]
        return slot.host_in if buffer.kind == "input" else slot.host_out

    def submit(self, slot: Slot) -> None:
        """Take the slot's frame in and put the output now due (if any) into ``host_out``;
        records the 'kernel' time."""
        begin = time.perf_counter()
        target = self._buffer(slot, self.walk.input_target())
        if slot.planes is not None:
            convert_colour(target, slot.host_in, slot.planes, to_rgb=True)
        elif target is not slot.host_in:
            np.copyto(target, slot.host_in)
        slot.has_output = self.walk.push(_HostSteps(self, slot))
        self._finish(slot, begin)

    def flush(self, slot: Slot) -> bool:
        """Put the next output still owed at the end of the stream into ``host_out``; False (and
        a new stream begins) when none is."""
        begin = time.perf_counter()
        slot.has_output = self.walk.flush(_HostSteps(self, slot))
        self._finish(slot, begin)
        return slot.has_output

    def _finish(self, slot: Slot, begin: float) -> None:
        if slot.has_output and slot.planes is not None:
            convert_colour(self._frames["rgb_out"], slot.host_out, slot.planes, to_rgb=False)
        slot.times["kernel"] = time.perf_counter() - begin

    def end_stream(self) -> None:
        """Forget the frames held: the next submit starts a new stream."""
        self.walk.restart()

    def apply_into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Refused: a temporal chain's output needs the frames around it.

        Raises:
            FilterSpecError: always, pointing at StreamFilter.
        """
        raise FilterSpecError(temporal_refusal(self.filters))

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Nothing to free early: host arrays go with their last reference."""

    def is_done(self, slot: Slot) -> bool:
        """Always True: submit() finished the work."""
        return True

    def wait(self, slot: Slot) -> None:
        """Nothing to wait for on the CPU."""

    def close(self) -> None:
        """Drop the rings."""
        self._rings = []


class _HostSteps:
    """The walk's steps on host frames, for one slot."""

    def __init__(self, backend: TemporalCpuBackend, slot: Slot) -> None:
        self.backend, self.slot = backend, slot

    def segment(self, number: int, source: Buffer, target: Buffer) -> None:
        backend = self.backend
        backend._segments[number].apply_into(backend._buffer(self.slot, target),
                                             backend._buffer(self.slot, source))

    def temporal(self, number: int, entries: Sequence[int], target: Buffer) -> None:
        backend = self.backend
        ring = backend._rings[number]
        temporal_into(backend._buffer(self.slot, target), [ring[entry] for entry in entries],
                      backend.walk.taps[number], backend.border)


def temporal_refusal(filters: Sequence[FilterStage]) -> str:
    """Why a chain with temporal stages cannot filter one frame on its own, and what to use."""
    stage = next(stage for stage in filters if stage.temporal is not None)
    # causal=1 reads past frames only: "around" would be wrong for it
    needs = "before" if stage.temporal.causal else "around"
    return (f"{stage.describe()} filters across frames: its output needs the frames {needs} it, "
            f"so it cannot filter one frame on its own; use StreamFilter (frames in order, "
            f"results in order, e.g. list(sf.map(frames)) or submit()/result() and flush()) or "
            f"a Pipeline")
