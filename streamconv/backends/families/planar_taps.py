"""Tap fragments of conv2d_tcp.cu, the tensor-core kernel for large K (channels as planes).

The kernel's unit is 16 rows x 8 pixels of one channel plane. Tap rows go four at a time (a
quad; K padded to whole quads with zero rows), and a quad's "half" is one 4-byte word of input
of its four tap rows: in half i, lane (g, t) (g = lane // 4, t = lane % 4) holds word
``first_word + i % words`` (relative to the unit's first pixel) of tap row ``4 (i // words) + t``.
Halves 2s and 2s + 1 are k = 0..15 and 16..31 of mma k-step s. The B operand of lane (g, t) in
a half is the digit of the tap that output pixel g applies to each of those 4 bytes, or 0.

The taps' integers (:mod:`.integer_taps`) are split: their ``dense`` low signed base-256 digits
go through the tensor cores, and what is left above them (non-zero only for the few taps whose
top digit is not zero, such as a sharpening filter's centre) through a short list the CUDA cores
add exactly (c_sparse).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from typing import Sequence

from . import integer_taps
from .integer_taps import IntegerTaps, pack_words

MAX_SPARSE = 8
"""The most taps the kernel's sparse list (its SPARSE) holds."""

MAX_B_REGISTERS = 160
"""The most B registers per lane (digits x steps x 2) the kernel keeps without spilling (sm_90:
K = 31 in 2 digits, 238 registers in all)."""


@dataclass(frozen=True)
class PlanarLayout:
    """conv2d_tcp.cu's k-steps for one radius (mirrors its kQuads, kFirstWord, kWords, kSteps).

    Attributes:
        radius: K = 2 x radius + 1.
        quads: tap rows in fours (the last padded with zero rows).
        first_word: the first 4-byte word a tap row reads, relative to the unit's first pixel.
        words: words per tap row.
        steps: mma k-steps per unit (two halves each).
    """

    radius: int
    quads: int
    first_word: int
    words: int
    steps: int

    def piece(self, half: int, t: int) -> tuple[int, int] | None:
        """(tap row, word) lane (., t) holds in ``half``, or None for a padding half."""
        if half >= self.quads * self.words:
            return None
        return 4 * (half // self.words) + t, self.first_word + half % self.words


def planar_layout(radius: int) -> PlanarLayout:
    """The k-step layout conv2d_tcp.cu compiles for ``radius``."""
    quads = (2 * radius + 1 + 3) // 4
    first = -((radius + 3) // 4)
    words = (7 + radius) // 4 - first + 1
    return PlanarLayout(radius, quads, first, words, -(-quads * words // 2))


@dataclass(frozen=True)
class PlanarTaps:
    """The taps as conv2d_tcp.cu takes them.

    Attributes:
        taps: the integers over a power of two (one bank).
        dense: the low digits the tensor cores multiply (the kernel's DIGITS).
        sparse: (S, 3) int32 host array of (dy, dx, value): each tap whose integer is not held by
            its dense digits, with the rest (the integer less its dense digits).
    """

    taps: IntegerTaps
    dense: int
    sparse: np.ndarray

    def sparse_table(self) -> np.ndarray:
        """``c_sparse``: int32 host array [count, dy0, dx0, value0, ...], MAX_SPARSE taps long."""
        table = np.zeros(1 + 3 * MAX_SPARSE, np.int32)
        table[0] = len(self.sparse)
        table[1:1 + self.sparse.size] = self.sparse.ravel()
        return table


def quantize(banks: Sequence[np.ndarray], radius: int,
             max_error: float = integer_taps.MAX_QUANT_ERROR) -> PlanarTaps | None:
    """``banks`` (one (K, K) host array, rounded to float32 as the GPU holds it) as conv2d_tcp.cu
    takes them: the fewest dense digits whose B registers fit :data:`MAX_B_REGISTERS`, at the
    largest shift whose worst-case error is at most ``max_error`` LSB (0 where the taps are
    exact there), whose sums fit int32 and whose taps outside the dense digits fit the sparse
    list; None if there is none."""
    taps = np.stack([np.asarray(b, np.float32).astype(np.float64) for b in banks])
    steps = planar_layout(radius).steps
    for dense in range(1, integer_taps.MAX_DIGITS + 1):
        if dense * steps * 2 > MAX_B_REGISTERS:
            return None
        for shift in range(integer_taps.MAX_SHIFT, 0, -1):
            found = _split_at(taps, shift, dense, max_error)
            if found is not None:
                return found
    return None


def _split_at(taps: np.ndarray, shift: int, dense: int, max_error: float) -> PlanarTaps | None:
    """The taps at ``shift`` with ``dense`` dense digits, or None if they miss a bound."""
    whole = integer_taps.at_shift(taps, shift, integer_taps.MAX_DIGITS)
    if whole is None or whole.error > max_error:
        return None
    planes = whole.digit_planes()[:, 0]  # digits above the taps' own are zero
    rest = whole.values[0] - sum(planes[d] * 256**d for d in range(dense))
    where = np.argwhere(rest != 0)
    if len(where) > MAX_SPARSE:
        return None
    sparse = np.array([(dy, dx, rest[dy, dx]) for dy, dx in where], np.int32).reshape(-1, 3)
    return PlanarTaps(whole, dense, sparse)


def planar_fragments(taps: PlanarTaps, radius: int) -> np.ndarray:
    """``g_bfrag`` of conv2d_tcp.cu: (dense, steps, 2, 32) uint32 host array, the B register of
    every lane for every k-step and half; byte j of a word is the digit for input byte j of the
    lane's word."""
    layout = planar_layout(radius)
    planes = taps.taps.digit_planes()[:taps.dense, 0]  # (dense, K, K)
    size = 2 * radius + 1
    table = np.zeros((taps.dense, layout.steps, 2, 32, 4), np.int64)
    for half in range(2 * layout.steps):
        for lane in range(32):
            n, t = lane // 4, lane % 4
            piece = layout.piece(half, t)
            if piece is None or piece[0] >= size:
                continue
            dy, word = piece
            for j in range(4):
                dx = 4 * word + j - n + radius  # input pixel - output pixel + R
                if 0 <= dx < size:
                    table[:, half // 2, half % 2, lane, j] = planes[:, dy, dx]
    return pack_words(table)


def products_per_frame(layout: PlanarLayout, grid: tuple[int, int, int], units_per_block: int,
                       dense: int) -> int:
    """The int8 products conv2d_tcp.cu's mma instructions issue for one frame, padding included."""
    return grid[0] * grid[1] * units_per_block * layout.steps * dense * 16 * 8 * 32
