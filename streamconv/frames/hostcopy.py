"""Copies of large host frames on several threads: one thread reaches about 9 GB/s, a few more
saturate memory. NumPy releases the GIL for plain copies, so the bands run in parallel, and
beside the caller's own Python work once they have started."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np


class PendingCopy:
    """A host copy under way on the copier's threads; :meth:`wait` returns once it is done."""

    def __init__(self, bands: list[Future]) -> None:
        self._bands = bands

    def wait(self) -> None:
        """Block until every band is copied (re-raising a band's error); idempotent."""
        for band in self._bands:
            band.result()
        self._bands = []


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
        self.start(dst, src).wait()

    def start(self, dst: np.ndarray, src: np.ndarray) -> PendingCopy:
        """Begin ``dst[...] = src`` (same-shape host arrays) and return while it runs.

        Returns once every band's thread is inside its copy, which runs without the GIL: a
        thread that is still waiting for the GIL would otherwise wait out the interpreter's
        switch interval (5 ms) behind a caller busy in Python. Neither array may be touched
        before :meth:`PendingCopy.wait`. Small arrays are copied before this returns.
        """
        rows = src.shape[0]
        if src.nbytes < self.min_bytes or rows < 2 * self.workers:
            np.copyto(dst, src)
            return PendingCopy([])
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="streamconv-copy")
        started = threading.Semaphore(0)

        def copy_band(a: int, b: int) -> None:
            started.release()
            np.copyto(dst[a:b], src[a:b])

        bounds = [rows * k // self.workers for k in range(self.workers + 1)]
        bands = [self._pool.submit(copy_band, a, b) for a, b in zip(bounds, bounds[1:])]
        for _ in bands:
            started.acquire()
        return PendingCopy(bands)

    def close(self) -> None:
        """Stop the threads; idempotent."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def same_buffer(image: np.ndarray, buffer: np.ndarray) -> bool:
    """Whether host array ``image`` is ``buffer`` itself: the same first byte, shape and strides
    (those of length-1 axes aside, which never step)."""
    def steps(array: np.ndarray) -> tuple:
        return tuple(stride for stride, size in zip(array.strides, array.shape) if size > 1)

    return (image.__array_interface__["data"][0] == buffer.__array_interface__["data"][0]
            and image.shape == buffer.shape and steps(image) == steps(buffer))


LARGE_FRAME_BYTES = 8 << 20
"""From this size (a 4K RGB frame is 24 MiB) a loop's frame copies take four threads, not two."""


def copier_for(frame_bytes: int, current: ParallelCopier) -> ParallelCopier:
    """The copier for a loop's frames of ``frame_bytes``: ``current`` if it has the right threads,
    else a new one (``current`` closed). Two threads up to LARGE_FRAME_BYTES: each band thread costs
    two GIL hand-offs a frame, which slowed 1080p loops busy in Python (benchmarks/api.py); four
    beyond, where the copy is the bound (4K on an H100 host: 2.15 ms a frame on two, 1.64 on
    four)."""
    workers = 4 if frame_bytes >= LARGE_FRAME_BYTES else 2
    if workers == current.workers:
        return current
    current.close()
    return ParallelCopier(workers)
