"""The default binding's driver objects: devices, primary contexts, streams, events, device and
page-locked memory and 2-D copies, each one cuda-bindings call (``cuda.bindings.driver``) away.

Contexts are pushed and popped around each block of work as the rest of streamconv expects (which
cuda-core's ``Device.set_current`` model does not do). Resources free themselves in the context
that made them, pushed for the call when it is not current (as PyCUDA does), unless that context
is gone: a primary context this binding let go of for the last time (the driver freed what it held,
and pushing it would touch freed memory), or the process is exiting.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Any

import numpy as np

from .binding import GpuCallError, GpuMemoryError

try:  # the cuda extra; its absence is reported by cuda_core_binding.load()
    from cuda.bindings import driver as cu
except ImportError as missing:  # pragma: no cover - depends on the installation
    cu = None
    IMPORT_ERROR: ImportError | None = missing
else:
    IMPORT_ERROR = None
    SUCCESS = cu.CUresult.CUDA_SUCCESS
    _NOT_READY = cu.CUresult.CUDA_ERROR_NOT_READY
    _OUT_OF_MEMORY = cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
    _HOST = cu.CUmemorytype.CU_MEMORYTYPE_HOST
    _DEVICE = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE


def check(result: tuple, call: str) -> Any:
    """The value(s) of a cuda-bindings call's ``(CUresult, values...)``, or GpuCallError."""
    error = result[0]
    if error != SUCCESS:
        kind = GpuMemoryError if error == _OUT_OF_MEMORY else GpuCallError
        raise kind(f"{call} failed: {getattr(error, 'name', error)}")
    return result[1] if len(result) == 2 else result[1:]


def in_context(context: Any, call, *args) -> tuple:
    """``call(*args)`` with ``context`` current (pushed for the call if it is not)."""
    current = cu.cuCtxGetCurrent()[1]
    if int(current) == int(context):
        return call(*args)
    cu.cuCtxPushCurrent(context)
    try:
        return call(*args)
    finally:
        cu.cuCtxPopCurrent()


# Retains of each primary context (by handle) this binding holds: a resource of one whose count fell
# to 0 is not freed (nor its context pushed). Contexts it never retained (a caller's) count as held.
_RETAINS: dict[int, int] = {}
_RETAINS_LOCK = threading.Lock()
_exiting = False


@atexit.register
def _at_exit() -> None:
    global _exiting
    _exiting = True  # the process's end frees every resource; no driver calls during teardown


def gone(context: Any) -> bool:
    """Whether ``context`` went with its last retain (or the process is exiting): what it held
    is freed already."""
    return _exiting or _RETAINS.get(int(context), 1) <= 0


def release(context: Any, call, handle: Any) -> None:
    """Free ``handle`` with ``call`` in ``context``, quietly (from __del__, at any time), unless
    the context is gone."""
    if gone(context):
        return
    with contextlib.suppress(Exception):  # a failed context: the process frees it
        in_context(context, call, handle)


class CudaCoreDevice:
    """A GPU by ordinal."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._device = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        name = check(cu.cuDeviceGetName(256, self._device), "cuDeviceGetName")
        self.name = name.split(b"\0")[0].decode()
        self.compute_capability = (self.attribute("COMPUTE_CAPABILITY_MAJOR"),
                                   self.attribute("COMPUTE_CAPABILITY_MINOR"))

    def attribute(self, name: str) -> int:
        """A ``CU_DEVICE_ATTRIBUTE_<name>`` value."""
        code = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return check(cu.cuDeviceGetAttribute(code, self._device), "cuDeviceGetAttribute")

    def retain_primary_context(self) -> CudaCoreContext:
        """A retain of this device's primary context."""
        return CudaCoreContext(self._device)


class CudaCoreContext:
    """A retain of a primary context, pushed and popped around work."""

    def __init__(self, device: Any) -> None:
        self._device = device
        self._context = check(cu.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        self.handle = int(self._context)
        self._retained = True
        with _RETAINS_LOCK:
            _RETAINS[self.handle] = _RETAINS.get(self.handle, 0) + 1

    def push(self) -> None:
        check(cu.cuCtxPushCurrent(self._context), "cuCtxPushCurrent")

    def pop(self) -> None:
        check(cu.cuCtxPopCurrent(), "cuCtxPopCurrent")

    def release(self) -> None:
        """Let this retain go (idempotent)."""
        if self._retained:
            self._retained = False
            with _RETAINS_LOCK:
                _RETAINS[self.handle] -= 1
            check(cu.cuDevicePrimaryCtxRelease(self._device), "cuDevicePrimaryCtxRelease")


class CudaCoreStream:
    """A blocking stream (ordered with the legacy default stream) of the current context."""

    def __init__(self) -> None:
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        flags = cu.CUstream_flags.CU_STREAM_DEFAULT  # blocking: ordered with the legacy stream
        self._stream = check(cu.cuStreamCreate(flags), "cuStreamCreate")
        self.handle = int(self._stream)

    def synchronize(self) -> None:
        check(cu.cuStreamSynchronize(self._stream), "cuStreamSynchronize")

    def wait_for_event(self, event: CudaCoreEvent) -> None:
        check(cu.cuStreamWaitEvent(self._stream, event.event, 0), "cuStreamWaitEvent")

    def __del__(self) -> None:
        if cu is not None and getattr(self, "handle", 0):
            release(self._context, cu.cuStreamDestroy, self._stream)


class CudaCoreEvent:
    """An event of the current context."""

    def __init__(self, *, timing: bool = True, blocking: bool = False) -> None:
        flags = (0 if timing else int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)) | \
            (int(cu.CUevent_flags.CU_EVENT_BLOCKING_SYNC) if blocking else 0)
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self.event = check(cu.cuEventCreate(flags), "cuEventCreate")

    def record(self, stream: CudaCoreStream | None = None) -> None:
        check(cu.cuEventRecord(self.event, 0 if stream is None else stream.handle), "cuEventRecord")

    def synchronize(self) -> None:
        check(cu.cuEventSynchronize(self.event), "cuEventSynchronize")

    def query(self) -> bool:
        error = cu.cuEventQuery(self.event)[0]
        if error == _NOT_READY:
            return False
        check((error,), "cuEventQuery")
        return True

    def time_since(self, start: CudaCoreEvent) -> float:
        return check(cu.cuEventElapsedTime(start.event, self.event), "cuEventElapsedTime")

    def __del__(self) -> None:
        if cu is not None and getattr(self, "event", None) is not None:
            release(self._context, cu.cuEventDestroy, self.event)


class CudaCoreBuffer:
    """Device memory of the current context; ``int(buffer)`` is its address."""

    def __init__(self, address: Any, nbytes: int) -> None:
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self._address, self.nbytes = address, nbytes
        self.address = int(address)

    def __int__(self) -> int:
        return self.address

    def __index__(self) -> int:
        return self.address

    def free(self) -> None:
        """Free it now (idempotent); a failure is raised."""
        if self.address:
            self.address = 0
            if not gone(self._context):
                check(in_context(self._context, cu.cuMemFree, self._address), "cuMemFree")

    def __del__(self) -> None:
        if cu is not None and getattr(self, "address", 0):
            self.address = 0
            release(self._context, cu.cuMemFree, self._address)


class PinnedBlock:
    """Page-locked host memory seen by NumPy (``np.asarray(block)``; the array's ``base``)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, portable: bool) -> None:
        nbytes = max(1, int(np.prod(shape)) * dtype.itemsize)
        flags = cu.CU_MEMHOSTALLOC_PORTABLE if portable else 0
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self.address = check(cu.cuMemHostAlloc(nbytes, flags), "cuMemHostAlloc")
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (self.address, False)}

    def free(self) -> None:
        """Free it now (idempotent); arrays on it must be gone or unused."""
        address, self.address = self.address, 0
        if address and not gone(self._context):
            check(in_context(self._context, cu.cuMemFreeHost, address), "cuMemFreeHost")

    def __del__(self) -> None:
        if cu is not None and getattr(self, "address", 0):
            address, self.address = self.address, 0
            release(self._context, cu.cuMemFreeHost, address)


class CudaCoreCopy2D:
    """A 2-D copy between host arrays and pitched device memory (``CUDA_MEMCPY2D``, made once)."""

    def __init__(self, width_bytes: int, height: int, src_pitch: int, dst_pitch: int,
                 src_device: int | None, dst_device: int | None) -> None:
        self._params = params = cu.CUDA_MEMCPY2D()
        params.WidthInBytes, params.Height = width_bytes, height
        params.srcPitch, params.dstPitch = src_pitch, dst_pitch
        self._held: list = [None, None]  # the host arrays, kept alive while the copy may run
        if src_device is not None:
            params.srcMemoryType, params.srcDevice = _DEVICE, src_device
        if dst_device is not None:
            params.dstMemoryType, params.dstDevice = _DEVICE, dst_device

    def set_src_host(self, array: np.ndarray) -> None:
        self._params.srcMemoryType, self._params.srcHost = _HOST, array.ctypes.data
        self._held[0] = array

    def set_dst_host(self, array: np.ndarray) -> None:
        self._params.dstMemoryType, self._params.dstHost = _HOST, array.ctypes.data
        self._held[1] = array

    def set_dst_device(self, address: int, pitch: int) -> None:
        params = self._params
        params.dstMemoryType, params.dstDevice, params.dstPitch = _DEVICE, address, pitch
        self._held[1] = None

    def __call__(self, stream: CudaCoreStream | None = None) -> None:
        if stream is None:
            check(cu.cuMemcpy2DUnaligned(self._params), "cuMemcpy2DUnaligned")
        else:
            check(cu.cuMemcpy2DAsync(self._params, stream.handle), "cuMemcpy2DAsync")


