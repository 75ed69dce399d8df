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
import functools
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from ..borders import BORDER_CODES, DEFAULT_BORDER, check_border
from ..errors import BackendUnavailableError, GpuFaultError, StreamError
from ..filters import FilterStage, check_sample_type
from ..frames import as_hwc, check_same_frame
from ..slots import Slot
from ..yuv import YuvLayout
from . import kernels, variants

log = logging.getLogger(__name__)


@dataclass
class _Stage:
    """One filter stage on the GPU: its plan, module (holding the taps) and function."""

    plan: variants.KernelPlan
    module: Any
    function: Any
    extra_args: tuple = ()  # after (src, dst, width, height, pitches): a textbook kernel's taps pointer
    allocations: list = field(default_factory=list)  # device memory the stage owns
    bank: Any = None  # a bank stage: its cuda_bank.GpuBank (plan, module and function are None)


@dataclass
class _DeviceSlot:
    """The device side of a slot."""

    stream: Any
    buffers: list  # device allocations: input, output, scratch
    pitch: int
    upload: Any
    download: Any
    events: dict = field(default_factory=dict)
    bank_buffers: dict = field(default_factory=dict)  # per bank stage number: its float tensors
    planes: list = field(default_factory=list)  # yuv420p frames: flat device planes, input and output


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


class CudaBackend:
    """Runs a filter chain with CUDA kernels on (H, W, C) uint8 or uint16 frames.

    Args:
        filters: the stages, applied in order; each rounds to the frame's sample type like
            the CPU backend.
        border: border mode for every stage.
        device: CUDA device number.
        pinned: page-locked host buffers (True, the fast path) or pageable ones (benchmarks).
        blocking_sync: waiting for a frame sleeps (True: frees a CPU core for decoders and
            encoders) or spins (False: lower latency in an application's own loop).
        kernel: ``auto`` or a variant of :mod:`streamconv.backends.variants` (``--kernel``).

    Raises:
        BackendUnavailableError: PyCUDA, the driver, the device or nvcc is missing.
        KernelCompileError: nvcc rejected a kernel.
        FilterSpecError: an unknown kernel, or one that cannot run a stage (``separable``
            for taps that are not rank 1).
    """

    name = "cuda"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                 device: int = 0, pinned: bool = True, blocking_sync: bool = True,
                 kernel: str = variants.AUTO) -> None:
        try:
            import pycuda.driver as driver
        except ImportError:
            raise BackendUnavailableError("cuda backend unavailable: pycuda not installed") from None
        self._driver = driver
        self.filters = list(filters)
        self.border = check_border(border)
        self.pinned = pinned
        self.blocking_sync = blocking_sync
        self.kernel = variants.check_kernel(kernel)
        for stage in self.filters:  # refuse a kernel that cannot run a stage before any GPU work
            if stage.layer is None:
                variants.choose_variant(stage, kernel)
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
        for stage in self.filters:
            if stage.layer is not None:
                from ..nn.gpu import GpuEngine
                from .cuda_bank import GpuBank

                layers = GpuEngine(driver, self._context, push=False)  # this backend's context, current here
                stages.append(_Stage(None, None, None, bank=GpuBank(stage.layer, shape, layers)))
                log.info("stage %s runs streamconv.nn's conv2d", stage.describe())
                continue
            plan = variants.plan_stage(stage, shape, BORDER_CODES[self.border], self.kernel, dtype)
            module = kernels.load_module(plan.source, plan.defines, self.arch)
            for symbol, values in plan.constants.items():
                address, size = module.get_global(symbol)
                if size != values.nbytes:
                    raise StreamError(f"{symbol} holds {size} bytes, stage {stage.describe()} "
                                      f"needs {values.nbytes}")
                driver.memcpy_htod(address, values)
            arguments = variants.plan_arguments(plan)
            function = module.get_function(plan.entry)
            function.prepare(arguments)
            gpu_stage = _Stage(plan, module, function)
            if arguments.endswith("P"):  # textbook entries: a taps pointer
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
                        dtype=np.uint8) -> list[tuple[variants.KernelPlan, Any]]:
        """(plan, PyCUDA function) of each stage for (H, W, C) frames of ``dtype``, compiling
        them if needed; benchmarks read registers and shared memory from the functions."""
        with self.activated():
            return [(stage.plan, stage.function) for stage in self._stages_for(tuple(shape), dtype)
                    if stage.bank is None]

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None, dtype=np.uint8) -> list[Slot]:
        """Make ``count`` slots for (H, W, C) frames of ``dtype`` (uint8 or uint16); compiles
        the kernels first.

        With ``planes``, the host buffers hold flat 4:2:0 planes (1.5 W H samples of
        ``planes.dtype``): they are uploaded as they are, converted to RGB (of
        ``planes.frame_dtype``) on the GPU before the chain and back after it.

        Raises:
            BackendUnavailableError: not enough pinned host or device memory, before any frame.
            FrameTypeError, FilterSpecError: a chain that cannot run on ``dtype`` frames.
        """
        dtype = np.dtype(planes.frame_dtype if planes is not None else dtype)  # the filters' frames
        with self.activated():
            self._stages_for(tuple(shape), dtype)
            if planes is not None:
                self._colour_functions(planes)
            self._check_device_memory(shape, count, planes, dtype.itemsize)
            slots = [self._new_slot(index, shape, planes, dtype) for index in range(count)]
        self._slots.extend(slots)
        return slots

    def _check_device_memory(self, shape: tuple[int, int, int], count: int, planes: YuvLayout | None,
                             sample_bytes: int) -> None:
        """Refuse slots that cannot fit in the free device memory, with the figures, before
        allocating any (a pitch of up to 512 bytes per row is allowed for)."""
        height, width, channels = shape
        frame_buffers = 3 if len(self.filters) > 1 else 2
        per_slot = (frame_buffers * height * (width * channels * sample_bytes + 512)
                    + (2 * planes.nbytes if planes else 0))
        free, total = self._driver.mem_get_info()
        if count * per_slot > free:
            raise BackendUnavailableError(
                f"not enough GPU memory for {count} slot(s) of {width}x{height}x{channels}: "
                f"they need {count * per_slot / 2**20:.0f} MiB, {free / 2**20:.0f} MiB of "
                f"{total / 2**20:.0f} MiB are free on {self.device_name} (try a smaller --ring)")

    def _colour_functions(self, layout: YuvLayout) -> tuple[Any, Any]:
        """The (to RGB, to YUV) kernels of colour.cu for ``layout``'s matrix and range, compiled once."""
        key = layout  # hashable; looked up per frame, so no key derivation here
        if key not in self._colour:
            module = kernels.load_module("colour", layout.kernel_defines, self.arch)
            to_rgb, to_yuv = module.get_function("yuv420_to_rgb"), module.get_function("rgb_to_yuv420")
            to_rgb.prepare("PPiii")
            to_yuv.prepare("PiPii")
            self._colour[key] = (module, to_rgb, to_yuv)
            log.info("colour %s converts on the GPU", layout.describe())
        return self._colour[key][1:]

    def _new_slot(self, index: int, shape: tuple[int, int, int], planes: YuvLayout | None,
                  dtype: np.dtype) -> Slot:
        driver = self._driver
        height, width, channels = shape
        row_bytes = width * channels * dtype.itemsize
        host_shape = planes.shape if planes is not None else shape
        host_dtype = planes.dtype if planes is not None else dtype
        try:
            if self.pinned:
                host_in = driver.pagelocked_empty(host_shape, host_dtype)
                host_out = driver.pagelocked_empty(host_shape, host_dtype)
            else:
                host_in, host_out = np.empty(host_shape, host_dtype), np.empty(host_shape, host_dtype)
            buffers, pitch = [], 0
            for _ in range(3 if len(self.filters) > 1 else 2):
                allocation, pitch = driver.mem_alloc_pitch(row_bytes, height, 16)
                buffers.append(allocation)
            device_planes = [driver.mem_alloc(planes.nbytes) for _ in range(2)] if planes is not None else []
        except (driver.MemoryError, driver.Error) as exc:
            megabytes = 2 * height * row_bytes / 2**20
            raise BackendUnavailableError(
                f"not enough GPU or pinned memory for a slot of {width}x{height}x{channels} "
                f"({megabytes:.1f} MiB host + device): {exc}") from None
        if planes is not None:
            # Planes go up and down whole; the last stage's RGB is converted into device_planes[1].
            planes_out = device_planes[1] if self.filters else device_planes[0]
            upload = functools.partial(driver.memcpy_htod_async, device_planes[0], host_in)
            download = functools.partial(driver.memcpy_dtoh_async, host_out, planes_out)
        else:
            upload = self._copy(row_bytes, height, src_host=host_in, src_pitch=row_bytes,
                                dst_device=buffers[0], dst_pitch=pitch)
            source = buffers[1] if self.filters else buffers[0]
            download = self._copy(row_bytes, height, src_device=source, src_pitch=pitch,
                                  dst_host=host_out, dst_pitch=row_bytes)
        bank_buffers = {number: stage.bank.allocate()
                        for number, stage in enumerate(self._stages_for(tuple(shape), dtype)) if stage.bank is not None}
        events = {name: driver.Event() for name in ("start", "uploaded", "computed")}
        events["done"] = driver.Event(driver.event_flags.BLOCKING_SYNC if self.blocking_sync else 0)
        device = _DeviceSlot(stream=driver.Stream(), buffers=buffers, pitch=pitch, upload=upload,
                             download=download, events=events, bank_buffers=bank_buffers, planes=device_planes)
        return Slot(index=index, host_in=host_in, host_out=host_out, device=device, planes=planes)

    def _copy(self, width_bytes: int, height: int, *, src_pitch: int, dst_pitch: int,
              src_host=None, src_device=None, dst_host=None, dst_device=None):
        copy = self._driver.Memcpy2D()
        if src_host is not None:
            copy.set_src_host(src_host)
        else:
            copy.set_src_device(src_device)
        if dst_host is not None:
            copy.set_dst_host(dst_host)
        else:
            copy.set_dst_device(dst_device)
        copy.src_pitch, copy.dst_pitch = src_pitch, dst_pitch
        copy.width_in_bytes, copy.height = width_bytes, height
        return copy

    def submit(self, slot: Slot) -> None:
        """Issue upload, kernels and download of the slot's frame on its stream; returns at once."""
        state: _DeviceSlot = slot.device
        stream, events = state.stream, state.events
        try:
            with self.activated():
                events["start"].record(stream)
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
        state: _DeviceSlot = slot.device
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
            if stage.bank is not None:
                stage.bank.launch(state.bank_buffers[number], source, target, state.pitch, stream)
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
        state: _DeviceSlot = slot.device
        events = state.events
        try:
            with self.activated():
                events["done"].synchronize()
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

    def apply(self, src: np.ndarray) -> np.ndarray:
        """Filter ``src`` into a new host array of the same shape and dtype."""
        dst = np.empty_like(src)
        self.apply_into(dst, src)
        return dst

    def close(self) -> None:
        """Wait for work in flight, free every buffer, stream and module, and release this backend's
        hold on the context (the process keeps one, unless a driver call failed)."""
        if self._context is None:
            return
        try:
            with self.activated():
                try:
                    for slot in self._slots:
                        self._free_slot(slot)
                    for stages in self._stages.values():
                        for stage in stages:
                            for allocation in stage.allocations:
                                allocation.free()
                            if stage.bank is not None:
                                stage.bank.free()
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
                self._free_slot(slot)
                self._slots.remove(slot)

    def _free_slot(self, slot: Slot) -> None:
        """Wait for the slot's stream, then free its buffers; the context must be current."""
        state: _DeviceSlot = slot.device
        with contextlib.suppress(self._driver.Error):
            state.stream.synchronize()
        for allocation in (*state.buffers, *state.planes):
            allocation.free()
        for buffers in state.bank_buffers.values():
            buffers.free()
        state.bank_buffers.clear()
        for host in (slot.host_in, slot.host_out):
            base = getattr(host, "base", None)
            if base is not None and hasattr(base, "free"):
                base.free()
        slot.device = None

    def __enter__(self) -> "CudaBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame_number(slot: Slot) -> str:
    return str(slot.meta.index) if slot.meta is not None else "(single frame)"


def _async_fault(slot: Slot, exc: BaseException) -> GpuFaultError:
    """The error for a fault found while waiting on ``slot``: reported there, caused maybe later."""
    return GpuFaultError(f"GPU failed at frame {_frame_number(slot)}: {exc} (an asynchronous fault is "
                         f"reported at the next wait: its cause may be up to --ring frames later)")
