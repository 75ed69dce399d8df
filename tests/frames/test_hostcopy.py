"""Parallel host copies give the same bytes as np.copyto, for any strides and sizes."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.frames.hostcopy import ParallelCopier


@pytest.mark.parametrize("shape", [(1080, 1920, 3), (7, 5), (2160, 640, 4)])
def test_parallel_copy_equals_copyto(rng, shape):
    source = rng.integers(0, 256, (shape[0] * 2,) + shape[1:], dtype=np.uint8)[::2]  # strided rows
    target = np.full(shape, 0x33, np.uint8)
    copier = ParallelCopier(3, min_bytes=1)
    copier.copy(target, source)
    copier.copy(target, source)  # the pool is reused
    copier.close()
    copier.close()
    np.testing.assert_array_equal(target, source)


@pytest.mark.parametrize("shape", [(1080, 1920, 3), (7, 5)])
def test_a_started_copy_is_complete_after_wait(rng, shape):
    source = rng.integers(0, 256, shape, dtype=np.uint8)
    target = np.full(shape, 0x33, np.uint8)
    copier = ParallelCopier(4)
    pending = copier.start(target, source)  # 1080p goes to the threads, 7x5 is copied at once
    pending.wait()
    pending.wait()
    copier.close()
    np.testing.assert_array_equal(target, source)


def test_a_failed_band_raises_from_wait():
    copier = ParallelCopier(2, min_bytes=1)
    pending = copier.start(np.zeros((8, 4), np.uint8), np.zeros((8, 5), np.uint8))  # shapes differ
    with pytest.raises(ValueError):
        pending.wait()
    copier.close()
