"""The CUDA backend: the filter chain on the GPU through the CUDA binding, one stream per slot.

Per slot: page-locked host buffers (``host_in``, ``host_out``), pitched device buffers
(input, output, and a scratch buffer for chains), a CUDA stream and four events. A frame
is issued as one asynchronous sequence on its slot's stream:

    record start -> upload (H2D, 2-D copy into the pitched buffer) -> record uploaded
    -> one kernel per stage (ping-pong between output and scratch) -> record computed
    -> download (D2H) -> record done

so with a ring of three, the upload of frame i+1 overlaps the kernel of frame i and the download of
frame i-1. Slots of yuv420p planes (``planes``) copy the flat planes up and down instead (uint8
yuv420p, or uint16 yuv420p10le / yuv420p12le with 16-bit RGB between), and the kernels begin and end
with colour.cu's conversions. Every CUDA call happens in the thread that created the backend, inside
a balanced push/pop of the device's primary context. Each launch's arguments are packed once per
slot and stage (:class:`~streamconv.gpu.binding.BoundLaunches`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator, Sequence

import numpy as np

from ...frames.borders import BORDER_CODES, DEFAULT_BORDER, check_border
from ...errors import BackendUnavailableError, GpuFaultError
from ...chain.filters import FilterStage
from ...frames.checks import as_hwc, check_same_frame
from ...interop.arrays import DeviceView
from ...interop.device_frame import DeviceFrame
from ...frames.slots import Slot, output_planes
from .device_frames import DeviceFrameRunner
from .host_frames import HostFrameRunner
from .slots import DeviceSlot, buffer_shape, check_device_memory, free_slot, new_slot
from .stages import CudaStage, free_stages, load_stages
from ..protocol import Backend
from ...frames.yuv import YuvLayout
from ...gpu import loader as kernel_loader
from ...gpu.device import keep_primary_context, load_binding, release_kept_context
from ...gpu.binding import Binding, BoundLaunches, Kernel
from ..plan import AUTO, ChainPlan, plan_chain
from ..families.base import KernelPlan

log = logging.getLogger(__name__)

_COLOUR_BLOCK = (32, 8, 1)  # colour.cu's conversions: a thread per 2 x 2 pixels


def colour_grid(width: int, height: int) -> tuple[int, int]:
    """colour.cu's grid for a W x H frame (blocks of :data:`_COLOUR_BLOCK`)."""
    return (width // 2 + 31) // 32, (height // 2 + 7) // 8


class CudaBackend(Backend):
    """Runs a filter chain with CUDA kernels on (H, W, C) uint8 or uint16 frames.

    Args:
        filters: the stages, applied in order; each rounds to the frame's sample type like
            the CPU backend.
        border: border mode for every stage.
        device: CUDA device number.
        pinned: page-locked host buffers (True, the fast path) or pageable ones (benchmarks).
        blocking_sync: waiting for a frame sleeps (True: frees a CPU core for decoders and
            encoders) or spins (False: lower latency in an application's own loop).
        kernel: ``auto`` or a variant of :mod:`streamconv.backends.plan` (``--kernel``).
        plan: the chain's plan (:func:`streamconv.backends.plan.plan_chain`) when the caller made
            it already; else it is made here from ``filters`` and ``kernel``.

    Raises:
        BackendUnavailableError: the CUDA binding, the driver or the device is missing, or a
            kernel is neither prebuilt nor compilable here.
        KernelCompileError: NVRTC or nvcc rejected a kernel.
        SettingsError: an unknown kernel.
        FilterSpecError: a kernel that cannot run a stage (``separable`` for taps that are
            not rank 1).
    """

    name = "cuda"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                 device: int = 0, pinned: bool = True, blocking_sync: bool = True,
                 kernel: str = AUTO, plan: ChainPlan | None = None) -> None:
        self._gpu = gpu = load_binding("cuda backend unavailable")
        self.filters = list(filters)
        self.border = check_border(border)
        self.pinned = pinned
        self.blocking_sync = blocking_sync
        # Refuses a kernel that cannot run a stage, before any GPU work.
        self.plan = plan if plan is not None else plan_chain(self.filters, kernel)
        if self.plan.filters != tuple(self.filters):
            raise ValueError("plan was made for another filter chain")
        self.kernel = self.plan.kernel
        self._context = None
        self._slots: list[Slot] = []
        self._stages: dict[tuple, list[CudaStage]] = {}  # (shape, dtype) -> compiled stages
        self._colour: dict[YuvLayout, tuple] = {}  # layout -> (module, to RGB, to YUV launches)
        self._device_number = device
        self._device_frames: DeviceFrameRunner | None = None  # made at the first device frame
        self._host_frames: HostFrameRunner | None = None  # made at the first apply_into
        self._failed = False  # a driver call failed: the context may be unusable
        try:
            self._device = gpu.device(device)
            major, minor = self._device.compute_capability
            # no int8 tensor-core mma before sm_80: plan again
            if major < 8 and self.plan.tensor_cores:
                self.plan = plan_chain(self.filters, self.kernel, tensor_cores=False)
            self._context = self._device.retain_primary_context()
            keep_primary_context(self._device, device)
        except gpu.errors as exc:
            raise BackendUnavailableError(f"cuda backend unavailable on device {device}: "
                                          f"{exc}") from None
        self.arch = f"sm_{major}{minor}"
        self.device_name = self._device.name

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """Make this backend's context current for the block, and pop it after, always."""
        self._context.push()
        try:
            yield
        except self._gpu.errors:
            self._failed = True
            raise
        finally:
            self._context.pop()

    @property
    def gpu(self) -> Binding:
        """The CUDA binding this backend runs on."""
        return self._gpu

    @property
    def device_number(self) -> int:
        """The CUDA device ordinal this backend runs on."""
        return self._device_number

    def describe(self) -> str:
        """One line naming the GPU and host-memory mode, for logs and stats."""
        memory = "pinned" if self.pinned else "pageable"
        return f"cuda {self.device_name} ({self.arch}, {memory} host buffers)"

    def stages_for(self, shape: tuple[int, int, int], dtype=np.uint8) -> list[CudaStage]:
        """Compile (memoized) and load one module per stage for (H, W, C) chain input frames of
        ``dtype`` (raises as :func:`streamconv.backends.cuda.stages.load_stages`)."""
        key = (tuple(shape), np.dtype(dtype))
        if key not in self._stages:
            self._stages[key] = load_stages(self._gpu, self._context, self.arch, self.filters,
                                            self.plan, BORDER_CODES[self.border], *key)
        return self._stages[key]

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (h, w, C) the chain makes of (H, W, C) frames (a geometry stage changes it)."""
        return self.plan.output_shape(tuple(shape))

    def compiled_stages(self, shape: tuple[int, int, int],
                        dtype=np.uint8) -> list[tuple[KernelPlan, Kernel]]:
        """(plan, kernel) of each stage for (H, W, C) frames of ``dtype``, compiling them if
        needed; benchmarks read registers and shared memory from the kernels."""
        with self.activated():
            return [(stage.plan, stage.function) for stage in self.stages_for(tuple(shape), dtype)
                    if stage.gpu_layer is None]

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None, dtype=np.uint8,
                       device_input: bool = False) -> list[Slot]:
        """Make ``count`` slots for (H, W, C) frames of ``dtype`` (uint8 or uint16); compiles
        the kernels first.

        With ``planes``, the host buffers hold flat 4:2:0 planes (1.5 W H samples of
        ``planes.dtype``): they are uploaded as they are, converted to RGB (of
        ``planes.frame_dtype``) on the GPU before the chain and back after it. With
        ``device_input`` too, a source that decodes on this GPU writes the planes into the slot's
        device buffer itself (``slot.device_input``) and nothing is uploaded.

        Raises:
            BackendUnavailableError: not enough pinned host or device memory, before any frame.
            FrameTypeError, SettingsError: a chain that cannot run on ``dtype`` frames.
        """
        dtype = np.dtype(planes.frame_dtype if planes is not None else dtype)  # the filters' frames
        shape = tuple(planes.frame_shape if planes is not None else shape)
        out_planes = output_planes(planes, self.output_shape(shape))
        with self.activated():
            self.stages_for(shape, dtype)
            if planes is not None:
                self._colour_functions(planes)
            check_device_memory(self._gpu, buffer_shape(self.plan.shapes(shape)), count, planes,
                                dtype.itemsize, self._frame_buffers, self.device_name, out_planes)
            slots = [self._new_slot(index, shape, (planes, out_planes), dtype, device_input)
                     for index in range(count)]
        self._slots.extend(slots)
        return slots

    def _colour_functions(self, layout: YuvLayout) -> tuple[BoundLaunches, BoundLaunches]:
        """The (to RGB, to YUV) launches of colour.cu for ``layout``'s matrix and range."""
        key = layout  # hashable; looked up per frame, so no key derivation here
        if key not in self._colour:
            module = kernel_loader.load_module("colour", layout.kernel_defines, self.arch,
                                               self._gpu)
            to_rgb = BoundLaunches(module.kernel("yuv420_to_rgb", "PPiii"), _COLOUR_BLOCK)
            to_yuv = BoundLaunches(module.kernel("rgb_to_yuv420", "PiPii"), _COLOUR_BLOCK)
            self._colour[key] = (module, to_rgb, to_yuv)
            log.info("colour %s converts on the GPU", layout.describe())
        return self._colour[key][1:]

    @property
    def _frame_buffers(self) -> int:
        """Device frames per slot: input and output, and scratch for a chain's ping-pong."""
        return 3 if len(self.filters) > 1 else 2

    def _new_slot(self, index: int, shape: tuple[int, int, int], planes: tuple, dtype: np.dtype,
                  device_input: bool = False) -> Slot:
        layer_buffers = {number: stage.gpu_layer.allocate() for number, stage
                         in enumerate(self.stages_for(tuple(shape), dtype))
                         if stage.gpu_layer is not None}
        return new_slot(self._gpu, index, self.plan.shapes(shape), planes, dtype,
                        frame_buffers=self._frame_buffers, filtered=bool(self.filters),
                        pinned=self.pinned, blocking_sync=self.blocking_sync,
                        layer_buffers=layer_buffers, device_input=device_input)

    def submit(self, slot: Slot) -> None:
        """Issue upload, kernels and download of the slot's frame on its stream; returns at once.
        A slot with ``device_input`` waits for its source's write instead of uploading."""
        state: DeviceSlot = slot.device
        stream, events = state.stream, state.events
        try:
            with self.activated():
                events["start"].record(stream)
                if slot.device_input is not None:
                    stream.wait_for_event(slot.device_input.written)
                else:
                    state.upload(stream)
                events["uploaded"].record(stream)
                self.launch_kernels(slot, stream)
                events["computed"].record(stream)
                state.download(stream)
                events["done"].record(stream)
        except self._gpu.errors as exc:
            raise GpuFaultError(f"GPU failed on frame {_frame_number(slot)}: {exc}") from None

    def launch_kernels(self, slot: Slot, stream) -> None:
        """Queue the chain's kernels (no copies) on ``stream``: device input buffer -> output
        buffer.

        Call inside :meth:`activated`. Benchmarks use it to time the kernels alone.
        """
        state: DeviceSlot = slot.device
        height, width, channels = slot.frame_shape
        stages = self.stages_for((height, width, channels), slot.frame_dtype)
        converting = slot.planes is not None and stages
        if converting:
            to_rgb, to_yuv = self._colour_functions(slot.planes)
            to_rgb(stream, colour_grid(width, height), int(state.planes[0]),
                   int(state.buffers[0]), width, height, state.pitch)
        buffers = [(int(buffer), state.pitch) for buffer in state.buffers]
        source = self.launch_chain(stream, slot.frame_shape, slot.frame_dtype, buffers[0],
                                   buffers[1],
                                   buffers[2] if len(buffers) > 2 else None, state.layer_buffers)
        if converting:
            height, width, _ = slot.out_shape
            to_yuv(stream, colour_grid(width, height), source, state.pitch,
                   int(state.planes[1]), width, height)

    def launch_chain(self, stream, shape: tuple[int, int, int], dtype, source: tuple[int, int],
                     final: tuple[int, int], spare: tuple[int, int] | None,
                     layer_buffers: dict) -> int:
        """Queue every stage on ``stream`` from the (H, W, C) frame at ``source`` to ``final``,
        ping-ponging through ``spare`` (needed for two stages or more); each a (device address,
        row pitch in bytes) pair, the address 16-byte aligned and the pitch a multiple of 16.

        Returns:
            The device address the last stage wrote: ``final``'s (``source``'s without stages).
        """
        stages = self.stages_for(tuple(shape), dtype)
        for number, (stage, entering) in enumerate(zip(stages, self.plan.shapes(shape))):
            height, width, _ = entering
            # Ping-pong so that the last stage always lands in ``final``.
            target = final if (len(stages) - 1 - number) % 2 == 0 else spare
            if stage.gpu_layer is not None:
                stage.gpu_layer.launch(layer_buffers[number], source[0], source[1], target[0],
                                       target[1], stream)
            else:
                stage.launches(stream, stage.plan.grid, source[0], target[0], width, height,
                               source[1], target[1], *stage.extra_args)
            source = target
        return source[0]

    def is_done(self, slot: Slot) -> bool:
        """True once the slot's download has finished (non-blocking)."""
        try:
            with self.activated():
                return slot.device.events["done"].query()
        except self._gpu.errors as exc:
            raise _async_fault(slot, exc) from None

    def wait(self, slot: Slot) -> None:
        """Block until the slot's frame is in ``host_out``; record upload/kernel/download times."""
        state: DeviceSlot = slot.device
        events = state.events
        try:
            with self.activated():
                events["done"].synchronize()
                if slot.device_input is None:  # else nothing was uploaded
                    slot.times["upload"] = events["uploaded"].time_since(events["start"]) / 1e3
                slot.times["kernel"] = events["computed"].time_since(events["uploaded"]) / 1e3
                slot.times["download"] = events["done"].time_since(events["computed"]) / 1e3
        except self._gpu.errors as exc:
            raise _async_fault(slot, exc) from None

    def apply_into(self, dst: np.ndarray, src: np.ndarray, *, stream: int | None = None) -> None:
        """Filter ``src`` into ``dst`` synchronously: (H, W, C) or (H, W) host arrays of one
        shape and dtype, uint8 or uint16, any strides; with ``stream`` (a handle), after that
        stream's pending work. See :class:`HostFrameRunner` for the copies it saves."""
        src3, dst3 = as_hwc(src, what="input frame"), as_hwc(dst, what="output frame")
        check_same_frame(dst3, src3, self.output_shape(src3.shape))
        self._host_runner().run(dst3, src3, stream)

    def apply(self, src: np.ndarray, *, stream: int | None = None) -> np.ndarray:
        """Filter host ``src`` into a new host array of its dtype and :meth:`output_shape`:
        page-locked memory from a pool (reused once the array is dropped), so nothing is copied on
        the host on the way out."""
        shape = self.output_shape(as_hwc(src, what="input frame").shape)
        out = self._host_runner().new_output(shape[:2] if src.ndim == 2 else shape, src.dtype)
        self.apply_into(out, src, stream=stream)
        return out

    def route_output(self, slot: Slot) -> np.ndarray | None:
        """Point the (RGB) slot's download at a page-locked frame leased from the pool and return
        it,
        or back at ``slot.host_out`` (None returned) for planes or when many frames are out."""
        if slot.planes is not None:
            return None
        leased = self._host_runner().new_output(slot.out_shape, slot.frame_dtype, plain=False)
        slot.device.download.set_dst_host(leased if leased is not None else slot.host_out)
        return leased

    def _host_runner(self) -> HostFrameRunner:
        if self._host_frames is None:
            self._host_frames = HostFrameRunner(self)
        return self._host_frames

    def apply_device(self, src: DeviceView, dst: DeviceView | None, stream: int | None, *,
                     wait: bool = True) -> DeviceFrame | None:
        """Filter a frame in this GPU's memory; see :meth:`DeviceFrameRunner.run` (``dst`` None: a
        new DeviceFrame is returned; ``stream``: the caller's stream handle)."""
        try:
            with self.activated():
                if self._device_frames is None:
                    self._device_frames = DeviceFrameRunner(self)
                return self._device_frames.run(src, dst, stream, wait=wait)
        except self._gpu.errors as exc:
            raise GpuFaultError(f"GPU failed on a device frame: {exc}") from None

    def close(self) -> None:
        """Wait for work in flight, free every buffer, stream and module, and release this backend's
        hold on the context (the process keeps one, unless a driver call failed)."""
        if self._context is None:
            return
        try:
            with self.activated():
                try:
                    if self._host_frames is not None:
                        self._host_frames.close()
                        self._host_frames = None
                    if self._device_frames is not None:
                        self._device_frames.close()
                        self._device_frames = None
                    for slot in self._slots:
                        free_slot(self._gpu, slot)
                    for stages in self._stages.values():
                        free_stages(stages)
                except self._gpu.errors as exc:
                    self._failed = True
                    # After a fault the context refuses every call; closing must not hide the
                    # first error. The memory goes when the process releases the context.
                    log.warning("GPU buffers not freed (the context failed earlier): %s", exc)
                self._slots.clear()
                self._stages.clear()
                self._colour.clear()
        finally:
            context, self._context = self._context, None
            context.release()
            if self._failed:
                release_kept_context(self._device_number)

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Free the host and device buffers of slots no longer used (after their frames
        finished)."""
        with self.activated():
            for slot in slots:
                # By identity: Slot's dataclass equality would compare (freed) buffers.
                self._slots = [kept for kept in self._slots if kept is not slot]
                free_slot(self._gpu, slot)


def _frame_number(slot: Slot) -> str:
    return str(slot.meta.index) if slot.meta is not None else "(single frame)"


def _async_fault(slot: Slot, exc: BaseException) -> GpuFaultError:
    """The error for a fault found while waiting on ``slot``: reported there, caused maybe later."""
    return GpuFaultError(f"GPU failed at frame {_frame_number(slot)}: {exc} (an asynchronous fault "
                         "is "
                         f"reported at the next wait: its cause may be up to --ring frames later)")
