"""Copies of large host frames on several threads: one thread reaches about 9 GB/s, a few more
saturate memory. NumPy releases the GIL for plain copies, so the bands run in parallel."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np


class ParallelCopier:
    """Copies (H, W[, C]) host arrays in row bands on a small thread pool.

    Args:
        workers: threads (default: a quarter of the cores, 2 to 4).
        min_bytes: smaller arrays are copied on the calling thread.
    """

    def __init__(self, workers: int | None = None, *, min_bytes: int = 1 << 20) -> None:
        self.workers = workers or max(2, min(4, (os.cpu_count() or 2) // 4))
        self.min_bytes = min_bytes
        self._pool: ThreadPoolExecutor | None = None

    def copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """``dst[...] = src`` for same-shape host arrays, in parallel when large."""
        rows = src.shape[0]
        if src.nbytes < self.min_bytes or rows < 2 * self.workers:
            np.copyto(dst, src)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="streamconv-copy")
        bounds = [rows * k // self.workers for k in range(self.workers + 1)]
        bands = [self._pool.submit(np.copyto, dst[a:b], src[a:b]) for a, b in zip(bounds, bounds[1:])]
        for band in bands:
            band.result()

    def close(self) -> None:
        """Stop the threads; idempotent."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
