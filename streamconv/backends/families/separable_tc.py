"""The tensor-core separable kernel's host side (sepconv_tc.cu): which rank-1 taps it takes,
their integer digits, and the A fragments of its row and column passes.

sepconv_tc.cu runs the row pass and the column pass as int8 x uint8 matrix products with int32
sums, and keeps the row pass's result (mid) as bytes. So the row taps H must be single-signed:
they are scaled to sum to 1 (the scale moves to the column taps V), which keeps every mid within
0..255. Both tap vectors are held as n = round(t x 2^shift) in two signed int8 digits. An output
then moves from the float32 result by at most

    0.5 x sum|V|                        (mid rounded to a byte)
  + 255 x sum|H - h / 2^s1| x sum|V|    (the row taps' rounding)
  + 255 x sum|V - v / 2^s2|             (the column taps' rounding)

output steps; the host takes the kernel only where that stays below :data:`MAX_ERROR`, so outputs
are within 1 LSB of the CPU backend (a few percent of them 1 off, from the rounded mid).

Fragments. Both passes use mma.m16n8k32 with the taps as the A operand (16 x 32, row-major):
register r of lane (g, t) holds row g (r = 0, 2) or g + 8 (r = 1, 3), k = 4t..4t+3 (r = 0, 1) or
16 + 4t.. (r = 2, 3), one digit per byte.
- Row pass, k-step c: row m of an m-tile computes byte column sigma(m) of its 16; k is input
  byte 32c + k of the window that starts ``left`` bytes before the m-tile.
- Column pass, k-step c: row r is output row r of 16; k maps to mid row
  -16 + 8 x group + 2 x (k % 16 // 4) + k % 2 with group = 4c + 2 x (k // 16) + k % 4 // 2
  (the order in which the kernel's byte permutes pair the row pass's groups), groups past 5 empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .integer_taps import fit, pack_words
from .rank1 import SeparableTaps

MAX_ERROR = 0.75
"""The most an output may move, in LSB, from the float32 result (below 1 keeps it within 1 LSB)."""

MAX_RADIUS = 15
"""The kernel holds six 8-row groups of mid rows: enough for 16 output rows up to K = 31."""

MT = 2
"""m-tiles (16 bytes each) per warp."""
WARPS = 4
STRIP_H = 128
"""Rows per warp strip. With MT and WARPS: best of a sweep on an H100 at 4K, K = 31."""


def sigma(m: int) -> int:
    """The byte column (of 16) that row m of a row-pass m-tile computes."""
    return 4 * (m // 2) + m % 2 if m < 8 else 4 * ((m - 8) // 2) + 2 + m % 2


def left_bytes(radius: int, channels: int) -> int:
    """How far the row-pass window starts before its m-tile (kLeft)."""
    return -(-radius * channels // 16) * 16


def row_chunks(radius: int, channels: int) -> int:
    """Row-pass k-steps per m-tile (kChunks)."""
    reach = radius * channels
    return -(-(left_bytes(radius, channels) + 16 + reach) // 32)


def column_mid_row(step: int, k: int) -> int | None:
    """The mid row (relative to the 16 output rows) that k-slot ``k`` of column k-step ``step``
    holds, or None for an empty slot."""
    group = 4 * step + 2 * (k // 16) + k % 4 // 2
    if group > 5:
        return None
    return -16 + 8 * group + 2 * (k % 16 // 4) + k % 2


def a_fragments(matrix: np.ndarray) -> np.ndarray:
    """(4, 32) uint32 host array: the m16n8k32 A registers of every lane for a (16, 32) int
    matrix of int8 values."""
    pieces = np.zeros((4, 32, 4), np.int64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg, (row, k0) in enumerate(((g, 4 * t), (g + 8, 4 * t), (g, 16 + 4 * t),
                                         (g + 8, 16 + 4 * t))):
            pieces[reg, lane] = matrix[row, k0:k0 + 4]
    return pack_words(pieces)


def _digits(values: np.ndarray) -> tuple[np.ndarray, int, np.ndarray] | None:
    """(n, shift, digit planes (2, K)) for (K,) float64 taps, not all zero, in two digits
    (integer_taps.fit); None if no shift holds them."""
    form = fit(values.reshape(1, 1, -1), 2)
    if form is None:
        return None
    return form.values[0, 0], form.shift, form.digit_planes()[:, 0, 0]


@dataclass(frozen=True)
class TensorSeparable:
    """What sepconv_tc.cu needs for one stage.

    Attributes:
        arow: (chunks, 2, 4, 32) uint32 host array, the row pass's A registers (g_arow).
        acol: (2, 2, 4, 32) uint32 host array, the column pass's A registers (g_acol).
        rounding: (4,) int32 host array {s1, 2^(s1-1), s2, 2^(s2-1)} (c_round).
        row, column: the integer taps h, v, (K,) int64.
        error: the worst-case output error in LSB (the bound in the module doc).
    """

    arow: np.ndarray
    acol: np.ndarray
    rounding: np.ndarray
    row: np.ndarray
    column: np.ndarray
    error: float


def plan(factors: SeparableTaps, radius: int, channels: int) -> TensorSeparable | None:
    """The tensor-core form of rank-1 taps (``factors`` from separable.factor_separable), or None
    where sepconv_tc.cu cannot hold them within :data:`MAX_ERROR` (row taps of both signs, zero
    taps, a radius above 15, or taps too large or too fine for two digits)."""
    row = factors.row.astype(np.float64)
    column = factors.column.astype(np.float64)
    if radius > MAX_RADIUS or not row.any() or not column.any():
        return None
    if (row < 0).any():
        if (row > 0).any():
            return None
        row, column = -row, -column
    scale = row.sum()
    row, column = row / scale, column * scale
    row_form, column_form = _digits(row), _digits(column)
    if row_form is None or column_form is None:
        return None
    h, s1, row_digits = row_form
    v, s2, col_digits = column_form
    column_sum = float(np.abs(column).sum())
    error = (0.5 * column_sum + 255 * float(np.abs(row - h / 2.0**s1).sum()) * column_sum
             + 255 * float(np.abs(column - v / 2.0**s2).sum()))
    if error >= MAX_ERROR:
        return None
    reach, left, chunks = radius * channels, left_bytes(radius,
                                                        channels), row_chunks(radius, channels)
    arow = np.zeros((chunks, 2, 4, 32), np.uint32)
    for c in range(chunks):
        for d in range(2):
            matrix = np.zeros((16, 32), np.int64)
            for m in range(16):
                for k in range(32):
                    delta = 32 * c + k - left - sigma(m)  # input byte - output byte
                    if delta % channels == 0 and abs(delta) <= reach:
                        matrix[m, k] = row_digits[d][delta // channels + radius]
            arow[c, d] = a_fragments(matrix)
    acol = np.zeros((2, 2, 4, 32), np.uint32)
    for c in range(2):
        for d in range(2):
            matrix = np.zeros((16, 32), np.int64)
            for r in range(16):
                for k in range(32):
                    mid = column_mid_row(c, k)
                    if mid is not None and abs(mid - r) <= radius:
                        matrix[r, k] = col_digits[d][mid - r + radius]
            acol[c, d] = a_fragments(matrix)
    rounding = np.array([s1, 1 << (s1 - 1), s2, 1 << (s2 - 1)], np.int32)
    return TensorSeparable(arow, acol, rounding, h, v, error)


def launch(width: int, height: int, channels: int) -> tuple[tuple[int, int, int],
                                                            tuple[int, int, int]]:
    """(block, grid) of sepconv_tc.cu for an H x W x C frame."""
    span = 16 * MT * WARPS  # grid x: strips of STRIP_H rows; grid y: block columns
    return (32 * WARPS, 1, 1), (-(-height // STRIP_H), -(-width * channels // span), 1)


def products_per_frame(height: int, width: int, channels: int, radius: int) -> int:
    """The int8 products the kernel's mma instructions issue for one H x W x C frame (16 x 8 x 32
    each)."""
    warps = -(-width * channels // (16 * MT))
    strips = -(-height // STRIP_H)
    blocks_out = STRIP_H // 16
    row_mmas = (2 * blocks_out + 4) * MT * row_chunks(radius, channels) * 2
    column_mmas = blocks_out * MT * 2 * 2 * 2
    return warps * strips * (row_mmas + column_mmas) * 16 * 8 * 32
