"""Driver calls on other libraries' raw handles: events recorded on, and waited for by, streams
given as handles (a caller's CuPy or PyTorch stream, a DLPack consumer's), and what memory an
address is in.

Through cuda-bindings whichever binding runs the rest: PyCUDA shows no event handles and no
pointer attributes. Stream handles are ints as the driver API takes them: 0 the legacy default
stream, 1 ``CU_STREAM_LEGACY``, 2 ``CU_STREAM_PER_THREAD``, else a ``CUstream``. Each call needs a
context of the handles' device current.
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import BackendUnavailableError
from .cuda_core_driver import check, release  # the default binding's error names and frees

MEMORY_HOST, MEMORY_DEVICE, MEMORY_ARRAY, MEMORY_UNIFIED = 1, 2, 3, 4
"""``CUmemorytype`` values."""


@functools.lru_cache(maxsize=1)
def _driver() -> Any:
    """``cuda.bindings.driver``, the driver initialized (cuInit is idempotent; another binding
    may have called it already)."""
    try:
        from cuda.bindings import (
            driver,  # the cuda extra (the pycuda extra installs it too)
        )
    except ImportError as exc:
        raise BackendUnavailableError(f"cuda-bindings not installed ({exc}; fix: pip install "
                                      "\"streamconv[cuda]\")") from None
    driver.cuInit(0)
    return driver


class Event:
    """A CUDA event by its raw handle, for ordering streams of any library; made in the current
    context, destroyed when dropped. Timing is off (cheaper to record).

    Args:
        blocking: waiting on it sleeps (True) or spins (False).
    """

    def __init__(self, *, blocking: bool = False) -> None:
        cu = _driver()
        flags = int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING) | \
            (int(cu.CUevent_flags.CU_EVENT_BLOCKING_SYNC) if blocking else 0)
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self._event = check(cu.cuEventCreate(flags), "cuEventCreate")
        self.handle = int(self._event)

    def record(self, stream_handle: int) -> None:
        """Record the event on ``stream_handle``'s queue."""
        check(_driver().cuEventRecord(self._event, stream_handle), "cuEventRecord")

    def synchronize(self) -> None:
        """Wait on the host until the work before the last record is done."""
        check(_driver().cuEventSynchronize(self._event), "cuEventSynchronize")

    def __del__(self) -> None:
        if getattr(self, "handle", 0):
            release(self._context, _driver().cuEventDestroy, self._event)


def wait_event(stream_handle: int, event_handle: int) -> None:
    """Make ``stream_handle``'s later work wait for ``event_handle``'s (the host does not wait)."""
    check(_driver().cuStreamWaitEvent(stream_handle, event_handle, 0), "cuStreamWaitEvent")


def pointer_memory(address: int) -> tuple[int | None, int | None]:
    """(memory type, device ordinal) of an address, or (None, None) for memory CUDA does not
    know (pageable host memory); the ordinal is asked for device memory only."""
    cu = _driver()
    attribute = cu.CUpointer_attribute
    error, kind = cu.cuPointerGetAttribute(attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
    if error != cu.CUresult.CUDA_SUCCESS or int(kind) == 0:  # unknown memory: an invalid value
        return None, None
    if int(kind) == MEMORY_HOST:
        return MEMORY_HOST, None
    error, ordinal = cu.cuPointerGetAttribute(attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                              address)
    found = int(ordinal) if error == cu.CUresult.CUDA_SUCCESS else -1
    return int(kind), (found if found >= 0 else None)


def allocation_context(address: int) -> int | None:
    """The CUcontext (as an int) that allocated device ``address``, or None where the driver
    does not know the address. Needs a context of the device current."""
    cu = _driver()
    error, context = cu.cuPointerGetAttribute(
        cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT, address)
    return int(context) if error == cu.CUresult.CUDA_SUCCESS else None
