"""The integer taps of the tensor-core kernel (backends/integer_taps.py), checked on the host: the
digits, the error bound, and the tap fragments, by emulating the kernel's mma sums in NumPy."""

import numpy as np
import pytest

from streamconv.backends.families import integer_taps
from streamconv.bench.kernels import random_taps


def emulate_unit_sums(padded: np.ndarray, taps: integer_taps.IntegerTaps,
                      layout: integer_taps.PieceLayout, row: int, byte: int) -> np.ndarray:
    """The int32 sums v[bank, 16 rows, 8 x group bytes] that conv2d_tc.cu forms for the unit at
    output row ``row``, output byte ``byte`` of ``padded`` (rows padded by R above, bytes by
    ``pad`` on the left, as its staged tile is), from the lane registers it would load."""
    words = integer_taps.fragment_table(taps, layout)
    table = words.view(np.int8).astype(np.int64).reshape(words.shape + (4,))  # byte i of each word
    banks, digits = table.shape[:2]
    sums = np.zeros((banks, 16, 8 * layout.group), np.int64)
    for step in range(layout.steps):
        for half in range(2):
            for lane in range(32):
                n, t = lane // 4, lane % 4
                piece = layout.piece(step, half, t)
                dy, word = piece if piece is not None else (0, layout.first_word)
                for m in range(16):
                    start = PAD + byte + 4 * word
                    a = padded[row + m + dy, start:start + 4].astype(np.int64)
                    for j in range(layout.group):
                        weight = table[:, :, j, step, half, lane, :]  # (banks, digits, 4)
                        for d in range(digits):
                            sums[:, m, 8 * j + n] += 256**d * (weight[:, d, :] @ a)
    return sums


PAD = 32


@pytest.mark.parametrize("size", [1, 3, 5, 7, 9])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("group, ldmatrix", [(1, False), (2, False), (2, True)])
def test_fragments_give_the_integer_correlation(size, channels, group, ldmatrix):
    rng = np.random.default_rng(size * 100 + channels * 10 + group)
    stage = random_taps(rng, size)
    taps = integer_taps.quantize(stage.taps)
    assert taps is not None
    layout = integer_taps.piece_layout(size // 2, channels, group, ldmatrix)
    radius = size // 2
    frame = rng.integers(0, 256, (16 + 2 * radius, 2 * PAD + 8 * group + 64), dtype=np.uint8)
    frame[:, :PAD] = rng.integers(0, 256, (frame.shape[0], PAD))
    byte = 8  # a unit away from the padding's edge
    got = emulate_unit_sums(frame, taps, layout, 0, byte)
    want = np.zeros_like(got)
    n = taps.values[0]
    for m in range(16):
        for b in range(8 * group):
            for dy in range(size):
                for dx in range(size):
                    want[0, m, b] += n[dy, dx] * int(frame[m + dy,
                                                           PAD + byte + b + channels * (
                                                               dx - radius)])
    np.testing.assert_array_equal(got, want)


def test_ldmatrix_groups_are_whole_rows_of_16_bytes():
    for channels in (1, 3, 4):
        layout = integer_taps.kernel_layout(2, channels)
        assert layout.ldmatrix and layout.group == 2 and layout.words % 4 == 0
        for step in range(layout.steps):
            for half in range(2):
                pieces = [layout.piece(step, half, t) for t in range(4)]
                if pieces[0] is None:
                    continue
                assert [dy for dy, _ in pieces] == [pieces[0][0]] * 4
                assert [w for _, w in pieces] == list(range(pieces[0][1], pieces[0][1] + 4))
                assert (pieces[0][1] - layout.first_word) % 4 == 0
    assert not integer_taps.kernel_layout(2, 3, banks=2).ldmatrix
    assert not integer_taps.kernel_layout(1, 3).ldmatrix


# mma counts at G = 1, and at 5 x 5 with ldmatrix, are those of the compiled kernel (its SASS
# has 2x these at 2 digits)
@pytest.mark.parametrize("size, channels, group, ldmatrix, steps, mmas", [
    (3, 3, 1, False, 2, 2), (5, 3, 1, False, 4, 4), (7, 3, 1, False, 7, 7), (9, 3, 1, False, 9, 9),
    (9, 3, 2, False, 12, 23), (5, 3, 2, True, 5, 10), (3, 3, 2, True, 3, 6),
])
def test_layout_counts_the_kernels_steps_and_mmas(size, channels, group, ldmatrix, steps, mmas):
    layout = integer_taps.piece_layout(size // 2, channels, group, ldmatrix)
    assert layout.steps == steps
    assert layout.mmas_per_unit(1) == mmas
    assert layout.mmas_per_unit(2, banks=2) == 4 * mmas


def test_exact_taps_stay_exact_and_the_bound_holds(rng):
    exact = np.round(random_taps(rng, 5).taps[0] * 256) / 256
    taps = integer_taps.quantize([exact])
    # the fewest digits that hold n = 256 t: one where every |n| <= 127 (a centre tap below 1/2, now
    # and then), else two
    assert taps.error == 0 and taps.digits == (1 if np.abs(exact * 256).max() <= 127 else 2)
    np.testing.assert_array_equal(taps.values[0] / 2.0**taps.shift, exact.astype(np.float32))
    planes = taps.digit_planes()
    assert planes.min() >= -128 and planes.max() <= 127
    np.testing.assert_array_equal(sum(planes[d] * 256**d for d in range(taps.digits)), taps.values)
    # inexact taps: the error bound holds on random windows, exactly computed
    stage = random_taps(rng, 5)
    taps = integer_taps.quantize(stage.taps)
    assert 0 < taps.error <= integer_taps.MAX_QUANT_ERROR
    windows = rng.integers(0, 256, (2000, 5, 5))
    exact_sums = (windows * stage.taps[0].astype(np.float32).astype(np.float64)).sum(axis=(1, 2))
    integer_sums = (windows * taps.values[0]).sum(axis=(1, 2)) / 2.0**taps.shift
    assert np.abs(exact_sums - integer_sums).max() <= taps.error


def test_what_no_digits_hold_is_refused():
    wide = np.zeros((3, 3))
    wide[0, 0], wide[1, 1] = 1e7, 1e-3
    assert integer_taps.quantize([wide]) is None
    assert integer_taps.quantize([np.full((3, 3), 1e9)]) is None  # int32 sums would overflow
