"""Frames in CUDA device memory (``video/x-raw(memory:CUDAMemory)``, from the nvcodec elements),
filtered where they lie through streamconv's GPU-array path (:class:`streamconv.Filter` on a
``__cuda_array_interface__`` view of the buffer's memory), no host copy, and handed on in the
same CUDA memory.

GStreamer's CUDA elements (1.22) each make a CUDA context of their own unless one is shared
with them, and memory of one context cannot be read by kernels of another. streamconv runs in
the device's primary context, so the element wraps that context as a GstCudaContext and shares it
with the pipeline before the decoder opens (:class:`SharedCudaContext`); memory from any other
context is refused with a message saying so.

GstCuda-1.0 (introspection, gir1.2-gst-plugins-bad-1.0 on Debian) and PyCUDA are imported when
CUDA memory is negotiated: both are optional.
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import BackendUnavailableError, Filter, FrameDeviceError, RunStats
from .buffers import FrameGeometry
from .formats import FrameFormat
from .seam import GpuCallError, binding, handles

PER_THREAD_STREAM = 2
"""CU_STREAM_PER_THREAD: the streaming thread's own default stream, which the filter's work is
ordered on and the element waits on (no stream of its own to make or free)."""



@dataclass(frozen=True)
class CudaArray:
    """A frame in device memory as ``__cuda_array_interface__`` (version 3) describes it: what
    :class:`streamconv.Filter` takes. The buffer's mapping keeps the memory alive meanwhile.

    Attributes:
        address: device address of the first sample.
        shape: (H, W, C) or (H, W) for one channel; strides: bytes per step of each axis.
        dtype: uint8 or uint16.
    """

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "version": 3,
            "shape": self.shape,
            "strides": self.strides,
            "typestr": self.dtype.str,
            "data": (self.address, False),
            "stream": None,
        }


def device_frame(address: int, fmt: FrameFormat, geometry: FrameGeometry) -> CudaArray:
    """The CudaArray of a packed frame at device ``address`` (the mapped memory's start), its first
    plane's offset and row stride from ``geometry``: (H, W) for grey, else (H, W, C)."""
    item = fmt.dtype.itemsize
    rows = (geometry.height, geometry.width)
    if fmt.channels == 1:
        return CudaArray(
            address + geometry.offsets[0], rows, (geometry.strides[0], item), fmt.dtype
        )
    return CudaArray(
        address + geometry.offsets[0],
        (*rows, fmt.channels),
        (geometry.strides[0], fmt.channels * item, item),
        fmt.dtype,
    )


def mapped_address(data: memoryview) -> int:
    """The address a mapping's memory view starts at, without reading it (for a CUDA mapping it
    is a device address: GStreamer's view of it must never be read on the host)."""
    return np.frombuffer(data, np.uint8).__array_interface__["data"][0]


@functools.lru_cache(maxsize=None)
def _library(name: str) -> ctypes.CDLL:
    return ctypes.CDLL(name)


allocation_context = handles.allocation_context
"""The CUcontext that allocated a device address (None: unknown to the driver)."""


def sync_cuda_memory(memory: Any) -> None:
    """Wait for the work GStreamer queued on a CUDA memory's own stream (``gst_cuda_memory_sync``,
    GStreamer 1.24 on; 1.22's elements finish their writes before handing memory on)."""
    sync = getattr(_library("libgstcuda-1.0.so.0"), "gst_cuda_memory_sync", None)
    if sync is not None:
        sync.argtypes = (ctypes.c_void_p,)
        sync(hash(memory))  # a GObject-introspection boxed value hashes as its C pointer


class SharedCudaContext:
    """The device's primary CUDA context (streamconv's), wrapped as a GstCudaContext for the
    pipeline's CUDA elements, so that the memory they make is memory streamconv's kernels can use.

    Args:
        device: the CUDA device number (the element's ``device``).

    Raises:
        BackendUnavailableError: the CUDA binding, the driver, GstCuda-1.0 or its CUDA library is
            missing.
    """

    def __init__(self, device: int) -> None:
        try:
            import gi  # optional: GStreamer's introspection, present wherever the element runs

            gi.require_version("GstCuda", "1.0")
            from gi.repository import GstCuda
        except (ImportError, ValueError) as exc:
            raise BackendUnavailableError(
                f"CUDA memory needs GstCuda-1.0: {exc}"
            ) from None
        if not GstCuda.cuda_load_library():
            raise BackendUnavailableError(
                "CUDA memory: GStreamer's CUDA library could not load libcuda"
            )
        self._gst_cuda = GstCuda
        try:
            self._primary = binding().device(device).retain_primary_context()
        except GpuCallError as exc:
            raise BackendUnavailableError(f"cuda device {device} unavailable: {exc}") from None
        self.handle = int(self._primary.handle)
        self.device = device
        self.context = GstCuda.CudaContext.new_wrapped(self.handle, device)
        if self.context is None:
            self.close()
            raise BackendUnavailableError(
                f"CUDA memory: GStreamer could not wrap device {device}'s context"
            )

    def gst_context(self) -> Any:
        """The Gst.Context to post (``have-context``) and to answer context queries with."""
        return self._gst_cuda.context_new_cuda_context(self.context)

    def answer(self, element: Any, query: Any) -> bool:
        """Answer a CONTEXT query for ``gst.cuda.context`` with this context; False for others."""
        return bool(self._gst_cuda.cuda_handle_context_query(element, query, self.context))

    def is_cuda_memory(self, memory: Any) -> bool:
        """Whether a Gst.Memory is GStreamer CUDA memory."""
        return bool(self._gst_cuda.is_cuda_memory(memory))

    @property
    def map_flag(self) -> int:
        """GST_MAP_CUDA: map flag that gives the device address instead of a host copy."""
        return int(self._gst_cuda.MAP_CUDA)

    def push(self) -> None:
        """Make the context current in this thread (for the element's own event calls)."""
        self._primary.push()

    def pop(self) -> None:
        self._primary.pop()

    def close(self) -> None:
        """Let the wrapped context and the retain of the primary context go; idempotent."""
        self.context = None
        primary, self._primary = getattr(self, "_primary", None), None
        if primary is not None:
            primary.release()


@dataclass
class _Queued:
    """A frame on the GPU: its buffer, the buffer's mapping, the event after its work, its start."""

    buffer: Any
    mapping: Any
    event: Any
    entered: float


class DeviceFrames:
    """Frames in CUDA memory, filtered in place on the GPU, up to ``in_flight`` queued at once.

    Args:
        spec, border, device: the chain (stages), border mode and CUDA device.
        in_flight: frames whose work may still run when the element returns (1: each waits).
        shared: the pipeline's shared context (its memory is what can be filtered).
        stats: where each frame's ``latency`` goes (from queued to done, as the host sees it;
            the GPU's own time is not measured here).

    Raises:
        BackendUnavailableError: no usable GPU for the cuda backend.
    """

    def __init__(
        self,
        spec: Any,
        *,
        border: str,
        device: int,
        kernel: str,
        in_flight: int,
        shared: SharedCudaContext,
        stats: RunStats,
    ) -> None:
        self.filter = Filter(
            list(spec), border=border, backend="cuda", device=device, kernel=kernel
        )
        self.in_flight = in_flight
        self.shared = shared
        self.stats = stats
        self._queue: deque[_Queued] = deque()

    @property
    def held(self) -> int:
        """Frames in flight."""
        return len(self._queue)

    def submit(
        self, buffer: Any, fmt: FrameFormat, geometry: FrameGeometry, map_flags: Any
    ) -> None:
        """Map ``buffer``'s CUDA memory (``map_flags``: read, write and GST_MAP_CUDA), queue the
        chain on it in place and keep it, mapped, until taken out.

        Raises:
            FrameDeviceError: memory that is not CUDA memory, or of another CUDA context.
            GpuFaultError: the GPU failed while queueing.
        """
        entered = time.perf_counter()
        memory = buffer.peek_memory(0)
        if buffer.n_memory() != 1 or not self.shared.is_cuda_memory(memory):
            raise FrameDeviceError("caps say CUDA memory but the buffer holds other memory")
        sync_cuda_memory(memory)
        ok, mapping = buffer.map(map_flags)
        if not ok:
            raise FrameDeviceError("the CUDA memory could not be mapped for writing")
        try:
            self._queue.append(self._launch(buffer, mapping, fmt, geometry, entered))
        except BaseException:
            buffer.unmap(mapping)
            raise

    def _launch(
        self, buffer: Any, mapping: Any, fmt: FrameFormat, geometry: FrameGeometry, entered: float
    ) -> _Queued:
        """Queue the filter on the mapped frame and an event after it, on the per-thread stream."""
        address = mapped_address(mapping.data)
        frame = device_frame(address, fmt, geometry)
        self.shared.push()
        try:
            owner = allocation_context(address)
            if owner is not None and owner != self.shared.handle:
                raise FrameDeviceError(
                    "CUDA memory from another CUDA context than streamconv's (an element upstream "
                    "made its own instead of taking the shared one: give it cuda-device-id equal "
                    "to streamconv's device)"
                )
            self.filter.apply_into(frame, frame, stream=PER_THREAD_STREAM)
            event = handles.Event(blocking=True)
            event.record(PER_THREAD_STREAM)
        finally:
            self.shared.pop()
        return _Queued(buffer, mapping, event, entered)

    def ready(self) -> bool:
        """Whether :meth:`take` returns a frame now: the ring is full or the oldest is done."""
        return bool(self._queue) and (
            len(self._queue) >= self.in_flight or self._done(self._queue[0])
        )

    def take(self, *, wait: bool = False) -> Any:
        """The oldest frame's buffer, its work finished and its memory unmapped, if :meth:`ready`
        (or any, with ``wait``); None if none."""
        if not self._queue or not (wait or self.ready()):
            return None
        queued = self._queue.popleft()
        try:
            self._finish(queued)
        finally:
            queued.buffer.unmap(queued.mapping)
        done = time.perf_counter()
        self.stats.record({"latency": done - queued.entered})
        return queued.buffer

    def _done(self, queued: _Queued) -> bool:
        self.shared.push()
        try:
            return bool(queued.event.query())
        finally:
            self.shared.pop()

    def _finish(self, queued: _Queued) -> None:
        self.shared.push()
        try:
            queued.event.synchronize()
        finally:
            self.shared.pop()

    def drop(self) -> None:
        """Let every frame in flight go (a flush), once the GPU is done with its memory."""
        while self._queue:
            queued = self._queue.popleft()
            try:
                self._finish(queued)
            finally:
                queued.buffer.unmap(queued.mapping)

    def close(self) -> None:
        """Drop what is in flight and release the filter; idempotent."""
        try:
            self.drop()
        finally:
            self.filter.close()
