"""OpenCV and a thread pool on host frames, for the CPU backend: per-thread scratch buffers,
OpenCV's views of (H, W, C) arrays, filter2D into a given array, bands of rows in parallel."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

_pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid that made it, pool)
_pool_lock = threading.Lock()


def run_bands(function, starts: Sequence[int], parallel: bool = True) -> None:
    """Call ``function(start)`` for each band, on a shared pool of as many threads as OpenCV uses
    (``parallel``), else in this thread.

    OpenCV and NumPy release the GIL, so the bands run in parallel (OpenCV's own threads
    split a single filter call only on frames of about a megapixel and more).
    """
    global _pool
    threads = cv2.getNumThreads()
    if not parallel or len(starts) == 1 or threads <= 1:
        for start in starts:
            function(start)
        return
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():  # a forked child has none of the threads
            _pool = (os.getpid(), ThreadPoolExecutor(threads, thread_name_prefix="streamconv-cpu"))
    for _ in _pool[1].map(function, starts):
        pass


class Scratch(threading.local):
    """Per-thread buffers kept between calls, one per name; a request for fewer rows gets a view."""

    def get(self, name: str, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
        array = self.__dict__.get(name)
        if (array is None or array.shape[1:] != shape[1:] or array.shape[0] < shape[0]
                or array.dtype != dtype):
            array = self.__dict__[name] = np.empty(shape, dtype)
        return array[:shape[0]]


def opencv_view(array: np.ndarray) -> np.ndarray:
    """OpenCV's view of an (H, W, C) array: (H, W) for one channel, else the array."""
    return array[:, :, 0] if array.shape[2] == 1 else array


def sample_rows(*arrays: np.ndarray) -> list[np.ndarray]:
    """OpenCV's views of (H, W, C) arrays of one shape for element-wise work: (H, W * C) where
    each row's samples lie in one run in every array (views, never copies), else
    :func:`opencv_view`'s. OpenCV takes a one-channel array with a scalar operand an order of
    magnitude faster than a three-channel one."""
    height, width, channels = arrays[0].shape
    if all(a.strides[2] == a.itemsize and a.strides[1] == channels * a.itemsize for a in arrays):
        return [a.reshape(height, width * channels) for a in arrays]
    return [opencv_view(a) for a in arrays]


def copy_result(dst: np.ndarray, result: np.ndarray) -> None:
    """OpenCV writes into ``dst=`` when it can, else returns a new array: copy that one."""
    if result is not dst:
        np.copyto(dst, result.reshape(dst.shape))


CV_DEPTHS = {np.dtype(np.uint8): cv2.CV_8U, np.dtype(np.uint16): cv2.CV_16U,
             np.dtype(np.float32): cv2.CV_32F}


def filter_into(dst: np.ndarray, src: np.ndarray, taps: np.ndarray,
                border: int = cv2.BORDER_CONSTANT, factors=None) -> None:
    """dst = cv2.filter2D(src, taps) for (H, W, C) arrays, in dst's depth; with ``factors``
    (a :class:`~streamconv.backends.families.rank1.SeparableTaps`), cv2.sepFilter2D of its row
    and column taps instead."""
    depth = CV_DEPTHS[dst.dtype]
    plane = opencv_view(dst)
    if factors is None:
        result = cv2.filter2D(opencv_view(src), depth, taps, dst=plane, borderType=border)
    else:
        result = cv2.sepFilter2D(opencv_view(src), depth, factors.row, factors.column, dst=plane,
                                 borderType=border)
    copy_result(plane, result)
