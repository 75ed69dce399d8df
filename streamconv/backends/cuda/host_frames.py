"""The CUDA backend's one-frame-at-a-time path for host frames (``Filter``): the fewest host copies.

A frame goes up from its own memory when that is page-locked (``StreamFilter.input_buffer``, a
leased result, a page-locked array of the caller's), else it is copied into the slot's
page-locked input
on several threads. The result comes down straight into the caller's array when that is
page-locked, or into a page-locked frame leased from a pool (what ``Filter()(x)`` returns), else
into the slot and then, on several threads, into the caller's array.
"""

from __future__ import annotations

import numpy as np

from ...gpu import handles
from ...frames.hostcopy import ParallelCopier
from ...interop.pinned_pool import PinnedFramePool
from ...frames.slots import Slot


def _page_locked_rows(array: np.ndarray) -> bool:
    """Whether host (H, W, C) ``array`` is C-contiguous page-locked memory (call with a context
    current)."""
    kind = handles.pointer_memory(array.ctypes.data)[0] if array.flags.c_contiguous else None
    return kind == handles.MEMORY_HOST


class HostFrameRunner:
    """Runs a CudaBackend's chain on single host frames, through one private slot per frame type.

    Args:
        backend: the :class:`streamconv.backends.cuda.backend.CudaBackend` whose slots, stages and
            context it uses.
    """

    def __init__(self, backend) -> None:
        self._backend = backend
        self.pool = PinnedFramePool(backend.gpu, backend.activated)
        self._copier = ParallelCopier()
        self._slots: dict[tuple, Slot] = {}
        self._entered = None
        self.host_copies = 0  # frames copied on the host (in or out): benchmarks count them

    def new_output(self, shape: tuple[int, ...], dtype: np.dtype, *,
                   plain: bool = True) -> np.ndarray | None:
        """A host array for a result: page-locked from the pool, or when many are out a plain one
        (``plain``) or None."""
        with self._backend.activated():
            leased = self.pool.lease(shape, dtype)
        if leased is None and plain:
            return np.empty(shape, dtype)
        return leased

    def run(self, dst3: np.ndarray, src3: np.ndarray, caller_stream: int | None = None) -> None:
        """Filter (H, W, C) host ``src3`` into host ``dst3`` (same shape and dtype; any strides,
        ``dst3`` writable) and return once it is there; with ``caller_stream``, after that
        stream's pending work."""
        backend = self._backend
        key = (src3.shape, src3.dtype)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = backend.allocate_slots(src3.shape, 1, dtype=src3.dtype)[0]
        state = slot.device
        with backend.activated():
            direct_in, direct_out = _page_locked_rows(src3), _page_locked_rows(dst3)
            if caller_stream is not None:
                self._wait_for(caller_stream, state.stream.handle)
        if direct_in:
            state.upload.set_src_host(src3)
        else:
            self._copier.copy(slot.host_in, src3)
            self.host_copies += 1
        if direct_out:
            state.download.set_dst_host(dst3)
        slot.reset()
        try:
            backend.submit(slot)
            backend.wait(slot)
        finally:
            state.upload.set_src_host(slot.host_in)
            state.download.set_dst_host(slot.host_out)
        if not direct_out:
            self._copier.copy(dst3, slot.host_out)
            self.host_copies += 1

    def _wait_for(self, caller_stream: int, stream_handle: int) -> None:
        """Order the slot's stream after the caller's pending work."""
        if self._entered is None:
            self._entered = handles.Event()
        self._entered.record(caller_stream)
        handles.wait_event(stream_handle, self._entered.handle)

    def close(self) -> None:
        """Stop the copy threads and free the pool's spare buffers (the slots are the backend's)."""
        self._copier.close()
        self.pool.close()
        self._slots.clear()
