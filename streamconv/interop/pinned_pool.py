"""Page-locked host frames that go back to a pool when dropped: results the GPU downloads
straight into, without a fresh allocation (and its page faults) or a host copy per frame.

A leased frame is an ordinary NumPy array whose ``base`` is the lease; when the array and
every view of it are gone, its memory is reused. A caller that keeps many results gets
page-locked memory up to ``max_leased`` frames, then ordinary arrays (``lease`` returns None),
so that pinning never grows without bound.
"""

from __future__ import annotations

import threading

import numpy as np


class PinnedFramePool:
    """Page-locked host buffers for frames, by size in bytes.

    Args:
        driver: ``pycuda.driver`` (allocation needs a context current; the memory is portable).
        keep: free buffers kept per size. max_leased: buffers out on loan at once, at most.
    """

    def __init__(self, driver, *, keep: int = 4, max_leased: int = 16) -> None:
        self._driver = driver
        self.keep, self.max_leased = keep, max_leased
        self._free: dict[int, list[np.ndarray]] = {}
        self._leased = 0
        self._lock = threading.Lock()
        self._closed = False
        self.allocated = 0

    def lease(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A C-contiguous page-locked host array of ``shape`` and ``dtype`` (contents undefined),
        or None when ``max_leased`` are out already."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        with self._lock:
            if self._closed or self._leased >= self.max_leased:
                return None
            blocks = self._free.get(nbytes)
            block = blocks.pop() if blocks else None
            self._leased += 1
        if block is None:
            try:
                block = self._driver.pagelocked_empty(nbytes, np.uint8,
                                                      mem_flags=self._driver.host_alloc_flags.PORTABLE)
            except (self._driver.MemoryError, self._driver.Error):
                with self._lock:
                    self._leased -= 1
                return None
            self.allocated += 1
        return np.asarray(_HostLease(self, block, shape, dtype))

    def _give_back(self, block: np.ndarray) -> None:
        with self._lock:
            self._leased -= 1
            blocks = self._free.setdefault(block.nbytes, [])
            if not self._closed and len(blocks) < self.keep:
                blocks.append(block)
                return
        block.base.free()

    def close(self) -> None:
        """Free the buffers held for reuse; those on loan are freed when they come back. Idempotent."""
        with self._lock:
            self._closed = True
            held = [block for blocks in self._free.values() for block in blocks]
            self._free.clear()
        for block in held:
            block.base.free()


class _HostLease:
    """A pool buffer on loan, seen by NumPy through the array interface; back to the pool when
    the last array on it is gone."""

    def __init__(self, pool: PinnedFramePool, block: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._pool, self._block = pool, block
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str, "version": 3,
                                    "data": (block.ctypes.data, False)}

    def __del__(self) -> None:
        self._pool._give_back(self._block)
