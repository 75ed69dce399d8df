"""Page-locked host frames that go back to a pool when dropped: results the GPU downloads
straight into, without a fresh allocation (and its page faults) or a host copy per frame.

A leased frame is an ordinary NumPy array whose ``base`` is the lease; when the array and
every view of it are gone, its memory is reused. A caller that keeps many results gets
page-locked memory up to ``max_leased`` frames, then ordinary arrays (``lease`` returns None),
so that pinning never grows without bound.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, ContextManager

import numpy as np

from ..gpu.binding import Binding
from .reuse import ReusePool


class PinnedFramePool:
    """Page-locked host buffers for frames, by size in bytes (:class:`.reuse.ReusePool`).

    Args:
        gpu: the CUDA binding (allocation needs a context current; the memory is portable).
        activated: a context manager factory that makes the allocating context current: a buffer
            that comes back on a thread where it is not (a result dropped by a worker thread)
            is freed inside it (PyCUDA cannot free it elsewhere and would leak it). Until
            close(): buffers that come back later are freed as they are (the context is gone).
        keep: free buffers kept per size. max_leased: buffers out on loan at once, at most.
    """

    def __init__(self, gpu: Binding, activated: Callable[[], ContextManager], *, keep: int = 4,
                 max_leased: int = 16) -> None:
        self._gpu, self._activated = gpu, activated
        self.buffers = ReusePool(self._allocate, self._free, keep=keep, max_taken=max_leased)

    def _free(self, block: np.ndarray) -> None:
        with self._activated():
            block.base.free()

    def _allocate(self, nbytes: int) -> np.ndarray:
        return self._gpu.alloc_host(nbytes, np.uint8, portable=True)

    def lease(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A C-contiguous page-locked host array of ``shape`` and ``dtype`` (contents undefined),
        or None when ``max_leased`` are out already (or no page-locked memory is left)."""
        dtype = np.dtype(dtype)
        try:
            block = self.buffers.take(math.prod(shape) * dtype.itemsize)
        except self._gpu.errors:
            return None
        return None if block is None else np.asarray(_HostLease(self.buffers, block, shape, dtype))

    def close(self) -> None:
        """Free the buffers held for reuse; those on loan are freed when they come back.
        Idempotent."""
        self.buffers.close()
        self._activated = contextlib.nullcontext


class _HostLease:
    """A pool buffer on loan, seen by NumPy through the array interface; back to the pool when
    the last array on it is gone."""

    def __init__(self, buffers: ReusePool, block: np.ndarray, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self._buffers, self._block = buffers, block
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str, "version": 3,
                                    "data": (block.ctypes.data, False)}

    def __del__(self) -> None:
        self._buffers.give_back(self._block, self._block.nbytes)
