"""The CUDA driver calls PyCUDA has no wrapper for when the handles belong to another library:
recording an event on, or making a stream wait on, a stream given as a raw handle, and asking
what memory a pointer is in. Loaded from the driver (``libcuda.so.1``) on first use.

Stream handles are ints as the driver API takes them: 0 the legacy default stream, 1
``CU_STREAM_LEGACY``, 2 ``CU_STREAM_PER_THREAD``, else a ``CUstream``.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from ..errors import FrameTypeError

MEMORY_HOST, MEMORY_DEVICE, MEMORY_ARRAY, MEMORY_UNIFIED = 1, 2, 3, 4
"""``CUmemorytype`` values."""

_ATTRIBUTE_MEMORY_TYPE = 2
_ATTRIBUTE_DEVICE_ORDINAL = 9
_SUCCESS = 0


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    library = ctypes.CDLL("libcuda.so.1")
    library.cuEventRecord.argtypes = (ctypes.c_void_p, ctypes.c_void_p)
    library.cuStreamWaitEvent.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint)
    library.cuPointerGetAttributes.argtypes = (ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
    library.cuEventCreate.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint)
    library.cuEventDestroy_v2.argtypes = (ctypes.c_void_p,)
    library.cuEventSynchronize.argtypes = (ctypes.c_void_p,)
    library.cuEventQuery.argtypes = (ctypes.c_void_p,)
    for function in (library.cuEventRecord, library.cuStreamWaitEvent, library.cuPointerGetAttributes,
                     library.cuEventCreate, library.cuEventDestroy_v2, library.cuEventSynchronize,
                     library.cuEventQuery):
        function.restype = ctypes.c_int
    return library


class DriverCallError(RuntimeError):
    """A driver call returned an error code (its number is in the message)."""


def _check(code: int, call: str) -> None:
    if code != _SUCCESS:
        raise DriverCallError(f"{call} failed with CUDA error {code}")


EVENT_BLOCKING_SYNC, EVENT_DISABLE_TIMING = 1, 2
"""``CUevent_flags`` values."""
_NOT_READY = 600


class Event:
    """A CUDA event by its raw handle (PyCUDA's events do not show theirs), for ordering streams of
    any library. Create it with the context current; it is destroyed when dropped.

    Args:
        blocking: waiting on it sleeps (True) or spins (False).
    """

    def __init__(self, *, blocking: bool = False) -> None:
        handle = ctypes.c_void_p()
        flags = EVENT_DISABLE_TIMING | (EVENT_BLOCKING_SYNC if blocking else 0)
        _check(_library().cuEventCreate(ctypes.byref(handle), flags), "cuEventCreate")
        self.handle = handle.value
        self._destroy = _library().cuEventDestroy_v2

    def record(self, stream_handle: int) -> None:
        """Record the event on ``stream_handle``'s queue."""
        record_event(self.handle, stream_handle)

    def synchronize(self) -> None:
        """Wait on the host until the work before the last record is done."""
        _check(_library().cuEventSynchronize(self.handle), "cuEventSynchronize")

    def query(self) -> bool:
        """Whether the work before the last record is done (without waiting)."""
        code = _library().cuEventQuery(self.handle)
        if code == _NOT_READY:
            return False
        _check(code, "cuEventQuery")
        return True

    def __del__(self) -> None:
        if getattr(self, "handle", None):
            self._destroy(self.handle)


def record_event(event_handle: int, stream_handle: int) -> None:
    """Record ``event_handle`` (a CUevent) on ``stream_handle`` (any stream of the current context's
    device). Call with a context current."""
    _check(_library().cuEventRecord(event_handle or None, stream_handle or None), "cuEventRecord")


def wait_event(stream_handle: int, event_handle: int) -> None:
    """Make ``stream_handle``'s later work wait for ``event_handle``'s work, without the host waiting."""
    _check(_library().cuStreamWaitEvent(stream_handle or None, event_handle or None, 0), "cuStreamWaitEvent")


_ATTRIBUTES = (ctypes.c_int * 2)(_ATTRIBUTE_MEMORY_TYPE, _ATTRIBUTE_DEVICE_ORDINAL)


def pointer_memory(address: int) -> tuple[int | None, int | None]:
    """(memory type, device ordinal) of an address, or (None, None) for memory CUDA does not know
    (pageable host memory); one driver call. Call with a context current."""
    kind, ordinal = ctypes.c_uint(0), ctypes.c_int(-1)
    values = (ctypes.c_void_p * 2)(ctypes.addressof(kind), ctypes.addressof(ordinal))
    if _library().cuPointerGetAttributes(2, _ATTRIBUTES, values, address) != _SUCCESS or kind.value == 0:
        return None, None
    return kind.value, (ordinal.value if ordinal.value >= 0 else None)


def stream_handle(stream: Any) -> int:
    """The CUstream handle of ``stream``: an int, or an object of CuPy (``.ptr``), PyTorch
    (``.cuda_stream``), PyCUDA (``.handle``), Numba (``.handle.value``) or any that speaks the CUDA
    stream protocol (``__cuda_stream__()`` -> (version, handle)).

    Raises:
        FrameTypeError: an object that names no stream this way (a TypeError).
    """
    if isinstance(stream, bool):
        raise FrameTypeError("stream=: expected a CUDA stream or an int handle, got a bool")
    if isinstance(stream, int):
        if stream < 0:
            raise FrameTypeError(f"stream=: a handle is >= 0, got {stream}")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if callable(protocol):
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        value = getattr(value, "value", value)  # a ctypes c_void_p (Numba)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if value is None and attribute == "handle" and hasattr(stream, "handle"):
            return 0  # a ctypes NULL: the default stream
    raise FrameTypeError(f"stream=: {type(stream).__name__} names no CUDA stream (expected an int handle, "
                         "or an object with __cuda_stream__, .cuda_stream, .ptr or .handle)")
