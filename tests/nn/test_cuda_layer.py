"""A convolution layer (``--filter bank``) on the CUDA backend against the CPU backend (within 1
LSB),
outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.chain.filters import parse_filter

from helpers.gpu_check import check_against_cpu
from helpers.nn import weights_file

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu():
    from streamconv.gpu.binding import binding

    return binding()


LAYERS = [(1, 3, False, 1), (3, 5, True, 1), (8, 3, True, 2), (5, 7, False, 3), (64, 3, True, 2),
          (3, 1, False, 2)]
FRAMES = [(1, 1), (37, 53), (1080, 1920)]


# A frame smaller than the pool window is an error (test_layer.py), so those pairs are left out.
@pytest.mark.parametrize("maps,k,relu,pool,height,width",
                         [layer + frame for layer in LAYERS for frame in FRAMES
                          if layer[3] <= min(frame)])
def test_layer_matches_cpu(rng, tmp_path, gpu, maps, k, relu, pool, height, width):
    weights = rng.uniform(-0.2, 0.2, (maps, 3, k, k))
    stage = parse_filter(
        f"bank:file={weights_file(tmp_path, weights)},relu={int(relu)},pool={pool}")
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    check_against_cpu([stage], frame, "reflect101", gpu)


def test_layer_in_a_chain(rng, tmp_path, gpu):
    """layer -> an exact 4-neighbour mean: the layer may differ by 1 LSB, and the mean of values
    that
    differ by at most 1 can round 1 further apart (2.5 -> 2 against 3.5 -> 4), so 2 LSB bound it."""
    from streamconv.backends.cpu.backend import CpuBackend
    from streamconv.backends.cuda.backend import CudaBackend

    weights = rng.uniform(-0.3, 0.3, (3, 3, 3, 3))
    weights[:, :, 1, 1] += np.eye(3)
    stages = [parse_filter(f"bank:file={weights_file(tmp_path, weights)},relu=1"),
              parse_filter("custom:taps=0,0.25,0;0.25,0,0.25;0,0.25,0")]
    frame = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    with CudaBackend(stages) as backend:
        chained = backend.apply(frame)
    expected = CpuBackend(stages).apply(frame)
    assert expected.std() > 1  # not a constant frame
    assert np.abs(chained.astype(int) - expected.astype(int)).max() <= 2


def test_layer_slots_in_flight_together(rng, tmp_path, gpu):
    """Three slots submitted before any is waited on: each keeps its own float buffers."""
    from streamconv.backends.cpu.backend import CpuBackend
    from streamconv.backends.cuda.backend import CudaBackend

    stage = parse_filter(
        f"bank:file={weights_file(tmp_path, rng.uniform(-0.2, 0.2, (8, 3, 5, 5)))},pool=2")
    frames = [rng.integers(0, 256, (270, 480, 3), dtype=np.uint8) for _ in range(3)]
    with CudaBackend([stage]) as backend:
        slots = backend.allocate_slots(frames[0].shape, 3)
        for slot, frame in zip(slots, frames):
            slot.host_in[:] = frame
            slot.host_out[:] = 0xA5
            backend.submit(slot)
        for slot, frame in zip(slots, frames):
            backend.wait(slot)
            expected = CpuBackend([stage]).apply(frame)
            assert np.abs(slot.host_out.astype(int) - expected.astype(int)).max() <= 1
