"""The CUDA backend: the filter chain on the GPU through PyCUDA, one stream per slot.

Per slot: page-locked host buffers (``host_in``, ``host_out``), pitched device buffers
(input, output, and a scratch buffer for chains), a CUDA stream and four events. A frame
is issued as one asynchronous sequence on its slot's stream:

    record start -> upload (H2D, 2-D copy into the pitched buffer) -> record uploaded
    -> one kernel per stage (ping-pong between output and scratch) -> record computed
    -> download (D2H) -> record done

so with a ring of three, the upload of frame i+1 overlaps the kernel of frame i and the
download of frame i-1. Slots of yuv420p planes (``planes``) copy the flat planes up and
down instead (uint8 yuv420p, or uint16 yuv420p10le / yuv420p12le with 16-bit RGB between), and the kernels
begin and end with colour.cu's conversions. Every CUDA call happens in the thread that created the backend,
inside a balanced push/pop of the device's primary context.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from ..borders import BORDER_CODES, DEFAULT_BORDER, check_border
from ..errors import BackendUnavailableError, GpuFaultError, StreamError
from ..filters import FilterStage, check_sample_type
from ..frames import as_hwc, check_same_frame
from ..nn.gpu import GpuEngine
from ..nn.gpu_layer import GpuLayer
from ..slots import Slot
from .cuda_slots import DeviceSlot, check_device_memory, free_slot, new_slot
from .protocol import Backend
from ..io.yuv import YuvLayout
from .. import kernel_loader
from .plan import AUTO, ChainPlan, plan_chain
from .families.base import KernelPlan

log = logging.getLogger(__name__)


@dataclass
class _Stage:
    """One filter stage on the GPU: its plan, module (holding the taps) and function."""

    plan: KernelPlan
    module: Any
    function: Any
    extra_args: tuple = ()  # after (src, dst, width, height, pitches): a textbook kernel's taps pointer
    allocations: list = field(default_factory=list)  # device memory the stage owns
    gpu_layer: GpuLayer | None = None  # a convolution layer (the bank filter): plan, module, function None


# One extra retain of each device's primary context, held for the process: creating and
# destroying a context costs about 0.1 s each (H200), which every pipeline would otherwise pay
# twice. A backend that met a GPU fault lets it go, so the next one starts on a fresh context.
_KEPT_CONTEXTS: dict[int, Any] = {}
_KEPT_LOCK = threading.Lock()


def _keep_context(device, number: int) -> None:
    with _KEPT_LOCK:
        if number not in _KEPT_CONTEXTS:
            _KEPT_CONTEXTS[number] = device.retain_primary_context()


def _release_kept_context(number: int) -> None:
    with _KEPT_LOCK:
        context = _KEPT_CONTEXTS.pop(number, None)
    if context is not None:
        context.detach()


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
        BackendUnavailableError: PyCUDA, the driver, the device or nvcc is missing.
        KernelCompileError: nvcc rejected a kernel.
        FilterSpecError: an unknown kernel, or one that cannot run a stage (``separable``
            for taps that are not rank 1).
    """

    name = "cuda"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                 device: int = 0, pinned: bool = True, blocking_sync: bool = True,
                 kernel: str = AUTO, plan: ChainPlan | None = None) -> None:
        try:
            import pycuda.driver as driver  # optional (the cuda extra): its absence is an error here
        except ImportError:
            raise BackendUnavailableError("cuda backend unavailable: pycuda not installed") from None
        self._driver = driver
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
        self._single: dict[tuple, Slot] = {}  # (shape, dtype) -> apply_into's slot
        self._stages: dict[tuple, list[_Stage]] = {}  # (shape, dtype) -> compiled stages
        self._colour: dict[YuvLayout, tuple[Any, Any, Any]] = {}  # layout -> (module, to RGB, to YUV)
        self._device_number = device
        self._failed = False  # a driver call failed: the context may be unusable
        try:
            driver.init()
            self._device = driver.Device(device)
            self._context = self._device.retain_primary_context()
            _keep_context(self._device, device)
        except driver.Error as exc:
            raise BackendUnavailableError(f"cuda backend unavailable on device {device}: {exc}") from None
        major, minor = self._device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = self._device.name()

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """Make this backend's context current for the block, and pop it after, always."""
        self._context.push()
        try:
            yield
        except self._driver.Error:
            self._failed = True
            raise
        finally:
            self._driver.Context.pop()

    def describe(self) -> str:
        """One line naming the GPU and host-memory mode, for logs and stats."""
        memory = "pinned" if self.pinned else "pageable"
        return f"cuda {self.device_name} ({self.arch}, {memory} host buffers)"

    def _stages_for(self, shape: tuple[int, int, int], dtype=np.uint8) -> list[_Stage]:
        """Compile (memoized) and load one module per stage for (H, W, C) frames of ``dtype``.

        Raises:
            FrameTypeError: 16-bit frames for a chain with a convolution layer (8-bit only).
            FilterSpecError: a ``--kernel`` variant that cannot take 16-bit frames.
        """
        dtype = np.dtype(dtype)
        key = (shape, dtype)
        if key in self._stages:
            return self._stages[key]
        check_sample_type(self.filters, dtype)
        driver = self._driver
        stages = []
        plans = self.plan.kernel_plans(shape, BORDER_CODES[self.border], dtype)
        for stage, plan in zip(self.filters, plans):
            if stage.layer is not None:
                engine = GpuEngine(driver, self._context, push=False)  # this backend's context, current here
                stages.append(_Stage(None, None, None, gpu_layer=GpuLayer(stage.layer, shape, engine)))
                log.info("stage %s runs streamconv.nn's conv2d", stage.describe())
                continue
            module = kernel_loader.load_module(plan.source, plan.defines, self.arch)
            for symbol, values in plan.constants.items():
                address, size = module.get_global(symbol)
                if size != values.nbytes:
                    raise StreamError(f"{symbol} holds {size} bytes, stage {stage.describe()} "
                                      f"needs {values.nbytes}")
                driver.memcpy_htod(address, values)
            function = module.get_function(plan.entry)
            function.prepare(plan.arguments)
            gpu_stage = _Stage(plan, module, function)
            if plan.arguments.endswith("P"):  # a taps pointer after the frame arguments
                gpu_stage.extra_args = (0,)  # unread unless the taps live in global memory
                if plan.global_taps is not None:
                    taps = driver.to_device(plan.global_taps)
                    gpu_stage.allocations.append(taps)
                    gpu_stage.extra_args = (int(taps),)
            log.info("stage %s runs as %s", stage.describe(), plan.label)
            stages.append(gpu_stage)
        self._stages[key] = stages
        return stages

    def compiled_stages(self, shape: tuple[int, int, int],
                        dtype=np.uint8) -> list[tuple[KernelPlan, Any]]:
        """(plan, PyCUDA function) of each stage for (H, W, C) frames of ``dtype``, compiling
        them if needed; benchmarks read registers and shared memory from the functions."""
        with self.activated():
            return [(stage.plan, stage.function) for stage in self._stages_for(tuple(shape), dtype)
                    if stage.gpu_layer is None]

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None, dtype=np.uint8, device_input: bool = False) -> list[Slot]:
        """Make ``count`` slots for (H, W, C) frames of ``dtype`` (uint8 or uint16); compiles
        the kernels first.

        With ``planes``, the host buffers hold flat 4:2:0 planes (1.5 W H samples of
        ``planes.dtype``): they are uploaded as they are, converted to RGB (of
        ``planes.frame_dtype``) on the GPU before the chain and back after it. With
        ``device_input`` too, a source that decodes on this GPU writes the planes into the slot's
        device buffer itself (``slot.device_input``) and nothing is uploaded.

        Raises:
            BackendUnavailableError: not enough pinned host or device memory, before any frame.
            FrameTypeError, FilterSpecError: a chain that cannot run on ``dtype`` frames.
        """
        dtype = np.dtype(planes.frame_dtype if planes is not None else dtype)  # the filters' frames
        with self.activated():
            self._stages_for(tuple(shape), dtype)
            if planes is not None:
                self._colour_functions(planes)
            check_device_memory(self._driver, shape, count, planes, dtype.itemsize, self._frame_buffers,
                                self.device_name)
            slots = [self._new_slot(index, shape, planes, dtype, device_input) for index in range(count)]
        self._slots.extend(slots)
        return slots

    def _colour_functions(self, layout: YuvLayout) -> tuple[Any, Any]:
        """The (to RGB, to YUV) kernels of colour.cu for ``layout``'s matrix and range, compiled once."""
        key = layout  # hashable; looked up per frame, so no key derivation here
        if key not in self._colour:
            module = kernel_loader.load_module("colour", layout.kernel_defines, self.arch)
            to_rgb, to_yuv = module.get_function("yuv420_to_rgb"), module.get_function("rgb_to_yuv420")
            to_rgb.prepare("PPiii")
            to_yuv.prepare("PiPii")
            self._colour[key] = (module, to_rgb, to_yuv)
            log.info("colour %s converts on the GPU", layout.describe())
        return self._colour[key][1:]

    @property
    def _frame_buffers(self) -> int:
        """Device frames per slot: input and output, and scratch for a chain's ping-pong."""
        return 3 if len(self.filters) > 1 else 2

    def _new_slot(self, index: int, shape: tuple[int, int, int], planes: YuvLayout | None,
                  dtype: np.dtype, device_input: bool = False) -> Slot:
        layer_buffers = {number: stage.gpu_layer.allocate() for number, stage
                         in enumerate(self._stages_for(tuple(shape), dtype)) if stage.gpu_layer is not None}
        return new_slot(self._driver, index, shape, planes, dtype, frame_buffers=self._frame_buffers,
                        filtered=bool(self.filters), pinned=self.pinned, blocking_sync=self.blocking_sync,
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
        except self._driver.Error as exc:
            raise GpuFaultError(f"GPU failed on frame {_frame_number(slot)}: {exc}") from None

    def launch_kernels(self, slot: Slot, stream) -> None:
        """Queue the chain's kernels (no copies) on ``stream``: device input buffer -> output buffer.

        Call inside :meth:`activated`. Benchmarks use it to time the kernels alone.
        """
        state: DeviceSlot = slot.device
        height, width, channels = slot.frame_shape
        stages = self._stages_for((height, width, channels), slot.frame_dtype)
        source = int(state.buffers[0])
        converting = slot.planes is not None and stages
        if converting:
            to_rgb, to_yuv = self._colour_functions(slot.planes)
            grid = ((width // 2 + 31) // 32, (height // 2 + 7) // 8)
            to_rgb.prepared_async_call(grid, (32, 8, 1), stream, int(state.planes[0]), source,
                                       width, height, state.pitch)
        for number, stage in enumerate(stages):
            # Ping-pong so that the last stage always lands in buffers[1].
            target = int(state.buffers[1 if (len(stages) - 1 - number) % 2 == 0 else 2])
            if stage.gpu_layer is not None:
                stage.gpu_layer.launch(state.layer_buffers[number], source, target, state.pitch, stream)
                source = target
                continue
            stage.function.prepared_async_call(stage.plan.grid, stage.plan.block, stream, source, target,
                                               width, height, state.pitch, state.pitch, *stage.extra_args)
            source = target
        if converting:
            to_yuv.prepared_async_call(grid, (32, 8, 1), stream, source, state.pitch, int(state.planes[1]),
                                       width, height)

    def is_done(self, slot: Slot) -> bool:
        """True once the slot's download has finished (non-blocking)."""
        try:
            with self.activated():
                return slot.device.events["done"].query()
        except self._driver.Error as exc:
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
        except self._driver.Error as exc:
            raise _async_fault(slot, exc) from None

    def apply_into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Filter ``src`` into ``dst`` synchronously: (H, W, C) or (H, W) host arrays of one
        shape and dtype, uint8 or uint16.

        Uses a private slot per frame shape and dtype, kept for reuse; any strides are accepted.
        """
        src3, dst3 = as_hwc(src, what="input frame"), as_hwc(dst, what="output frame")
        check_same_frame(dst3, src3)
        key = (src3.shape, src3.dtype)
        slot = self._single.get(key)
        if slot is None:
            slot = self.allocate_slots(src3.shape, 1, dtype=src3.dtype)[0]
            self._single[key] = slot
        np.copyto(slot.host_in, src3)
        slot.reset()
        self.submit(slot)
        self.wait(slot)
        np.copyto(dst3, slot.host_out)

    def close(self) -> None:
        """Wait for work in flight, free every buffer, stream and module, and release this backend's
        hold on the context (the process keeps one, unless a driver call failed)."""
        if self._context is None:
            return
        try:
            with self.activated():
                try:
                    for slot in self._slots:
                        free_slot(self._driver, slot)
                    for stages in self._stages.values():
                        for stage in stages:
                            for allocation in stage.allocations:
                                allocation.free()
                            if stage.gpu_layer is not None:
                                stage.gpu_layer.free()
                except self._driver.Error as exc:
                    self._failed = True
                    # After a fault the context refuses every call; closing must not hide the
                    # first error. The memory goes when the process releases the context.
                    log.warning("GPU buffers not freed (the context failed earlier): %s", exc)
                self._slots.clear()
                self._single.clear()
                self._stages.clear()
                self._colour.clear()
        finally:
            context, self._context = self._context, None
            context.detach()
            if self._failed:
                _release_kept_context(self._device_number)

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Free the host and device buffers of slots no longer used (after their frames finished)."""
        with self.activated():
            for slot in slots:
                free_slot(self._driver, slot)
                self._slots.remove(slot)


def _frame_number(slot: Slot) -> str:
    return str(slot.meta.index) if slot.meta is not None else "(single frame)"


def _async_fault(slot: Slot, exc: BaseException) -> GpuFaultError:
    """The error for a fault found while waiting on ``slot``: reported there, caused maybe later."""
    return GpuFaultError(f"GPU failed at frame {_frame_number(slot)}: {exc} (an asynchronous fault is "
                         f"reported at the next wait: its cause may be up to --ring frames later)")
