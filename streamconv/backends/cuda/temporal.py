"""The CUDA backend for chains with stages across frames: each temporal stage's last frames in a
device ring beside the slots, each frame uploaded (or decoded by NVDEC) once.

Per temporal stage, one pitched allocation holds its ring of T + 1 input frames. A slot's
submit queues, on its own stream: the upload (straight into the first ring when no 2-D stage
comes before it), the colour conversion, the walk's steps (:mod:`.temporal_chain`: 2-D segments
ping-ponging through the slot's buffers, temporal kernels reading their rings) and, when the
walk emitted an output, the download. Slots run on different streams, so the rings' writes and
reads are ordered with events: a write into an entry waits for the last kernel that read its
old frame (the one two inputs back, since the ring holds one frame more than the window), the
writes of one ring finish in order, and a ring's kernels run in order after its writes. So the
upload of frame i + 1 overlaps the kernels of frame i, as on the 2-D path.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from ...errors import FilterSpecError, FrameDeviceError, GpuFaultError
from ...frames.slots import Slot
from ...gpu.binding import Binding, Event, Stream
from .backend import CudaBackend, colour_grid
from .slots import DeviceSlot
from ..families.temporal import MAX_POINTERS
from ..temporal_chain import Buffer, TemporalWalk
from ..cpu.temporal import temporal_refusal

log = logging.getLogger(__name__)


class _RingOrder:
    """The events that order one temporal stage's ring across the slots' streams."""

    def __init__(self, gpu: Binding) -> None:
        self._launch_pool = [gpu.event(timing=False) for _ in range(4)]
        self._written_pool = [gpu.event(timing=False) for _ in range(2)]
        self.launches = 0
        self.launch_at: dict[int, Event] = {}  # input number -> the event after its kernel
        self.last_launch: Event | None = None
        self.last_written: Event | None = None

    def before_write(self, stream: Stream, number: int) -> None:
        """Input ``number`` is about to be written: after the kernel that read the entry's old
        frame."""
        event = self.launch_at.get(number - 2)
        if event is not None:
            stream.wait_for_event(event)

    def after_write(self, stream: Stream, number: int) -> None:
        """Input ``number`` is written (on ``stream``): its event comes after the previous
        input's."""
        if self.last_written is not None:
            stream.wait_for_event(self.last_written)
        self.last_written = self._written_pool[number % 2]
        self.last_written.record(stream)

    def before_launch(self, stream: Stream) -> None:
        """A kernel of this stage runs after its writes and after its previous kernel."""
        for event in (self.last_written, self.last_launch):
            if event is not None:
                stream.wait_for_event(event)

    def after_launch(self, stream: Stream, number: int | None) -> None:
        """The kernel just queued (triggered by input ``number``, None in a flush) is done here."""
        self.last_launch = self._launch_pool[self.launches % len(self._launch_pool)]
        self.launches += 1
        self.last_launch.record(stream)
        if number is not None:
            self.launch_at = {n: e for n, e in self.launch_at.items() if n > number - 3}
            self.launch_at[number] = self.last_launch

    def settle(self) -> None:
        """Wait (on the host) for the last kernel, and forget the stream: a new one may write
        any entry."""
        if self.last_launch is not None:
            self.last_launch.synchronize()
        self.launch_at.clear()
        self.last_launch = self.last_written = None


class TemporalCudaBackend(CudaBackend):
    """Runs a chain with temporal stages on the GPU: the CUDA backend for such chains.

    ``submit`` takes a frame in and puts out the frame ``delay`` submissions older
    (``slot.has_output`` False while the windows fill); ``flush`` puts out the rest. Arguments
    and errors as :class:`~streamconv.backends.cuda.backend.CudaBackend`.
    """

    def __init__(self, filters: Sequence, **options: Any) -> None:
        super().__init__(filters, **options)
        self.walk = TemporalWalk(self.filters)
        self.delay = self.walk.delay
        # Per temporal stage: (allocation, pitch, bytes per entry).
        self._rings: list[tuple[Any, int, int]] = []
        self._order: list[_RingOrder] = []
        self._positions = [n for n, stage in enumerate(self.filters) if stage.temporal is not None]

    def allocate_slots(self, shape, count, *, planes=None, dtype=np.uint8,
                       device_input=False) -> list[Slot]:
        """Slots as :meth:`CudaBackend.allocate_slots` makes them, and each temporal stage's ring
        of T + 1 frames (allocated here, freed with the backend or the next allocation)."""
        slots = super().allocate_slots(shape, count, planes=planes, dtype=dtype,
                                       device_input=device_input)
        frame_dtype = np.dtype(planes.frame_dtype if planes is not None else dtype)
        height, width, channels = shape
        with self.activated():
            self._free_rings()
            for window in self.walk.windows:
                row_bytes = width * channels * frame_dtype.itemsize
                rows = height * window.capacity
                allocation, pitch = self._gpu.alloc_pitch(row_bytes, rows)
                self._rings.append((allocation, pitch, pitch * height))
            self._order = [_RingOrder(self._gpu) for _ in self.walk.windows]
        self.walk.restart()
        return slots

    def _free_rings(self) -> None:
        for order in self._order:
            order.settle()
        for allocation, _, _ in self._rings:
            allocation.free()
        self._rings, self._order = [], []

    def submit(self, slot: Slot) -> None:
        """Upload the slot's frame (or wait for its decoder) into the walk's input, run what it
        makes ready and, if an output is due, download it; returns at once."""
        self._run(slot, flush=False)

    def flush(self, slot: Slot) -> bool:
        """Queue the next output still owed at the end of the stream into ``slot``; False (and a new
        stream begins) when none is."""
        self._run(slot, flush=True)
        if not slot.has_output:
            self.end_stream()
        return slot.has_output

    def end_stream(self) -> None:
        """Forget the frames held: the next submit starts a new stream (after the last kernels)."""
        with self.activated():
            for order in self._order:
                order.settle()
        self.walk.restart()

    def _run(self, slot: Slot, *, flush: bool) -> None:
        state: DeviceSlot = slot.device
        stream, events = state.stream, state.events
        steps = _DeviceSteps(self, slot)
        try:
            with self.activated():
                events["start"].record(stream)
                if not flush:
                    self._take_input(slot, steps)
                events["uploaded"].record(stream)
                slot.has_output = self.walk.flush(steps) if flush else self.walk.push(steps)
                if slot.has_output and slot.planes is not None:
                    _, to_yuv = self._colour_functions(slot.planes)
                    height, width, _ = slot.frame_shape
                    to_yuv(stream, colour_grid(width, height), int(state.buffers[1]),
                           state.pitch, int(state.planes[1]), width, height)
                events["computed"].record(stream)
                if slot.has_output:
                    state.download(stream)
                events["done"].record(stream)
        except self._gpu.errors as exc:
            raise GpuFaultError(f"GPU failed on a frame of a temporal chain: {exc}") from None

    def _take_input(self, slot: Slot, steps: _DeviceSteps) -> None:
        """Bring the slot's frame to the walk's input: the slot's buffer 0, or the first ring's
        next entry (ordered against the kernels still reading its old frame)."""
        state: DeviceSlot = slot.device
        stream = state.stream
        target = self.walk.input_target()
        address, pitch = steps.address(target)
        if target.kind == "ring":
            self._order[0].before_write(stream, self.walk.windows[0].received)
        if slot.device_input is not None:
            stream.wait_for_event(slot.device_input.written)
        elif slot.planes is not None:
            state.upload(stream)
        else:
            state.upload.set_dst_device(address, pitch)
            state.upload(stream)
        if slot.planes is not None:
            to_rgb, _ = self._colour_functions(slot.planes)
            height, width, _ = slot.frame_shape
            to_rgb(stream, colour_grid(width, height), int(state.planes[0]), address, width,
                   height, pitch)
        if target.kind == "ring":
            self._order[0].after_write(stream, self.walk.windows[0].received)

    alternate = True
    """Whether successive time-only kernels of a stage take the frame from alternate ends
    (temporal.cu's ``reverse``: each starts where the last one's reads may still be in L2)."""

    def launch_temporal(self, number: int, entries: Sequence[int], target: tuple[int, int], stream,
                        shape: tuple[int, int, int], dtype, launch: int = 0) -> None:
        """Queue temporal stage ``number``'s kernel on ``stream``: its ring's ``entries`` (one per
        used window position) into ``target`` (device address, pitch); ``launch`` counts the
        stage's kernels (its parity picks the direction, see ``alternate``). No ordering events:
        :class:`_DeviceSteps` adds them; benchmarks call this directly. Call inside
        :meth:`activated`."""
        stage = self.stages_for(shape, dtype)[self._positions[number]]
        base, pitch, entry_bytes = self._rings[number]
        frames = [int(base) + entry * entry_bytes for entry in entries] or [int(base)]
        frames += [0] * (MAX_POINTERS - len(frames))
        height, width, _ = shape
        time_only = stage.plan.source == "temporal"
        reverse = (int(self.alternate and launch % 2 == 1),) if time_only else ()
        stage.launches(stream, stage.plan.grid, *frames, target[0], width, height, pitch,
                       target[1], *reverse)

    def launch_segment(self, number: int, source: tuple[int, int], target: tuple[int, int],
                       spare: tuple[int, int] | None, slot: Slot) -> None:
        """Queue the 2-D stages of segment ``number`` on the slot's stream, ``source`` to
        ``target`` through ``spare`` (each a device address and pitch), as launch_chain does for a
        whole chain."""
        numbers = self.walk.segments[number]
        stages = self.stages_for(slot.frame_shape, slot.frame_dtype)
        height, width, _ = slot.frame_shape
        stream = slot.device.stream
        for done, index in enumerate(numbers):
            stage = stages[index]
            out = target if (len(numbers) - 1 - done) % 2 == 0 else spare
            assert out is not None, "a segment of two stages or more has a spare buffer"
            if stage.gpu_layer is not None:
                stage.gpu_layer.launch(slot.device.layer_buffers[index], source[0], source[1],
                                       out[0], out[1], stream)
            else:
                stage.launches(stream, stage.plan.grid, source[0], out[0], width, height,
                               source[1], out[1], *stage.extra_args)
            source = out

    def launch_kernels(self, slot: Slot, stream) -> None:
        """Not one frame's kernels: a temporal chain's work depends on the frames around it."""
        raise FilterSpecError(temporal_refusal(self.filters))

    def apply_into(self, dst, src, *, stream=None) -> None:
        """Refused: a temporal chain's output needs the frames around it (use StreamFilter)."""
        raise FilterSpecError(temporal_refusal(self.filters))

    def apply_device(self, src, dst, stream, *, wait=True):
        """Refused: device frames go through a temporal chain nowhere yet (copy them to the host
        and use StreamFilter, or decode on the GPU in a Pipeline)."""
        raise FrameDeviceError(f"{temporal_refusal(self.filters)}; device frames through such a "
                               f"chain are not taken yet (StreamFilter takes host frames)")

    def close(self) -> None:
        """Free the rings, then everything else as :meth:`CudaBackend.close` does."""
        if self._context is not None and self._rings:
            try:
                with self.activated():
                    self._free_rings()
            except self._gpu.errors as exc:
                log.warning("temporal rings not freed (the context failed earlier): %s", exc)
        super().close()


class _DeviceSteps:
    """The walk's steps on one slot's device buffers and the rings, with their ordering events."""

    def __init__(self, backend: TemporalCudaBackend, slot: Slot) -> None:
        self.backend, self.slot = backend, slot
        self.stream = slot.device.stream

    def address(self, buffer: Buffer) -> tuple[int, int]:
        """(device address, pitch) of a walk's buffer: input and work in buffer 0, output in 1."""
        state: DeviceSlot = self.slot.device
        if buffer.kind == "ring":
            base, pitch, entry_bytes = self.backend._rings[buffer.stage]
            return int(base) + buffer.entry * entry_bytes, pitch
        return int(state.buffers[1 if buffer.kind == "output" else 0]), state.pitch

    def _spare(self) -> tuple[int, int] | None:
        buffers = self.slot.device.buffers
        return (int(buffers[2]), self.slot.device.pitch) if len(buffers) > 2 else None

    def segment(self, number: int, source: Buffer, target: Buffer) -> None:
        self._writing(target, lambda: self.backend.launch_segment(
            number, self.address(source), self.address(target), self._spare(), self.slot))

    def temporal(self, number: int, entries: Sequence[int], target: Buffer) -> None:
        backend, walk = self.backend, self.backend.walk
        order = backend._order[number]
        window = walk.windows[number]
        order.before_launch(self.stream)
        shape, dtype, launch = self.slot.frame_shape, self.slot.frame_dtype, order.launches
        self._writing(target, lambda: backend.launch_temporal(
            number, entries, self.address(target), self.stream, shape, dtype, launch))
        order.after_launch(self.stream, None if window.ended else window.received - 1)

    def _writing(self, target: Buffer, launch) -> None:
        """Run ``launch``; when it writes a ring, ordered as such writes are."""
        if target.kind != "ring":
            launch()
            return
        order = self.backend._order[target.stage]
        number = self.backend.walk.windows[target.stage].received
        order.before_write(self.stream, number)
        launch()
        order.after_write(self.stream, number)
