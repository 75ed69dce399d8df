"""The tap fragments and sparse taps of the large-K tensor-core kernel (families/planar_taps.py),
checked on the host by emulating conv2d_tcp.cu's mma sums over one plane in NumPy."""

import numpy as np
import pytest

from streamconv.backends.families import integer_taps, planar_taps
from streamconv.bench.kernels import random_taps

PAD = 16  # the kernel's left halo for every radius up to 15


def emulate_unit_sums(plane: np.ndarray, taps: planar_taps.PlanarTaps, radius: int) -> np.ndarray:
    """(16, 8) int64: the sums v that conv2d_tcp.cu forms for the unit at the top-left output of
    ``plane`` (a uint8 plane staged as the kernel stages it: R rows above, PAD pixels left), from
    the A words each lane loads and the B words of its fragment table, plus the sparse taps."""
    layout = planar_taps.planar_layout(radius)
    words = planar_taps.planar_fragments(taps, radius)
    # (dense, steps, 2, 32, 4)
    table = words.view(np.int8).astype(np.int64).reshape(words.shape + (4,))
    sums = np.zeros((16, 8), np.int64)
    for half in range(2 * layout.steps):
        for lane in range(32):
            n, t = lane // 4, lane % 4
            piece = layout.piece(half, t)
            dy, word = piece if piece is not None else (0, layout.first_word)
            for m in range(16):
                a = plane[m + dy, PAD + 4 * word:PAD + 4 * word + 4].astype(np.int64)
                for d in range(taps.dense):
                    sums[m, n] += 256**d * (table[d, half // 2, half % 2, lane] @ a)
    for dy, dx, value in taps.sparse:
        sums += value * plane[dy:dy + 16, PAD + dx - radius:PAD + dx - radius + 8].astype(np.int64)
    return sums


def correlation(plane: np.ndarray, values: np.ndarray, radius: int) -> np.ndarray:
    """(16, 8) int64: sum_{dy,dx} values[dy, dx] x plane[m + dy, PAD + n + dx - R]."""
    size = 2 * radius + 1
    want = np.zeros((16, 8), np.int64)
    for dy in range(size):
        for dx in range(size):
            want += values[dy, dx] * plane[dy:dy + 16,
                                           PAD + dx - radius:PAD + dx - radius + 8].astype(np.int64)
    return want


@pytest.mark.parametrize("size", [3, 9, 11, 15, 21, 31])
def test_fragments_and_sparse_taps_give_the_integer_correlation(size):
    rng = np.random.default_rng(size)
    radius = size // 2
    taps = planar_taps.quantize(random_taps(rng, size).taps, radius)
    assert taps is not None
    plane = rng.integers(0, 256, (16 + 4 * planar_taps.planar_layout(radius).quads, 2 * PAD + 24),
                         dtype=np.uint8)
    np.testing.assert_array_equal(emulate_unit_sums(plane, taps, radius),
                                  correlation(plane, taps.taps.values[0], radius))


def test_a_large_centre_tap_goes_to_the_sparse_list():
    """The bench's taps (noise around an identity) need 3 digits at K = 15 and 31: the centre's
    top digit is its only non-zero one, so the tensor cores take 2 and the list holds the centre."""
    rng = np.random.default_rng(7)
    for size in (15, 31):
        stage = random_taps(rng, size)
        assert integer_taps.quantize(stage.taps).digits == 3
        taps = planar_taps.quantize(stage.taps, size // 2)
        assert taps.dense == 2 and taps.taps.error <= integer_taps.MAX_QUANT_ERROR
        assert [tuple(row[:2]) for row in taps.sparse] == [(size // 2, size // 2)]
        assert taps.sparse_table()[0] == 1


def test_exact_small_taps_need_no_sparse_list():
    taps = planar_taps.quantize([np.full((21, 21), 1 / 441, np.float32)], 10)
    assert taps.dense == 2 and len(taps.sparse) == 0 and \
        taps.taps.error <= integer_taps.MAX_QUANT_ERROR
    exact = planar_taps.quantize([np.full((17, 17), 1 / 256, np.float32)], 8)
    assert exact is not None and exact.taps.error == 0 and len(exact.sparse) == 0


def test_what_the_registers_cannot_hold_is_refused():
    """Nine large taps among small ones need a third digit on more taps than the sparse list holds:
    three dense digits fit the registers at K = 15 but not at K = 31 (240 B registers)."""
    rng = np.random.default_rng(3)
    for size, dense in ((15, 3), (31, None)):
        taps = rng.normal(0, 1, (size, size)) / size**2
        taps[size // 2, :9] = 0.5
        planar = planar_taps.quantize([taps.astype(np.float32)], size // 2)
        assert (planar and planar.dense) == dense


@pytest.mark.parametrize("radius, steps", [(5, 9), (7, 12), (10, 24), (15, 40)])
def test_layout_counts_the_kernels_steps(radius, steps):
    assert planar_taps.planar_layout(radius).steps == steps
