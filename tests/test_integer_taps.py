"""The integer taps of the tensor-core kernel (backends/integer_taps.py), checked on the host: the
digits, the error bound, and the tap fragments, by emulating the kernel's mma sums in NumPy."""

import numpy as np
import pytest

from streamconv.backends import integer_taps
from streamconv.bench import random_taps


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
@pytest.mark.parametrize("group", [1, 2])
def test_fragments_give_the_integer_correlation(size, channels, group):
    rng = np.random.default_rng(size * 100 + channels * 10 + group)
    stage = random_taps(rng, size)
    taps = integer_taps.quantize(stage.taps)
    assert taps is not None
    layout = integer_taps.piece_layout(size // 2, channels, group)
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
                    want[0, m, b] += n[dy, dx] * int(frame[m + dy, PAD + byte + b + channels * (dx - radius)])
    np.testing.assert_array_equal(got, want)
