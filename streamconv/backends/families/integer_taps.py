"""Integer taps for the tensor-core kernels (conv2d_tc.cu, and conv3_tc.cu for one 3x3
matrix): how float taps become int8 digits, and the per-lane tap fragments their ``mma`` take.

conv2d_tc.cu multiplies bytes (u8) by signed 8-bit tap digits on the tensor cores with exact
int32 sums. A float tap t is held as the integer n = round(t x 2^shift), written in ``digits``
signed base-256 digits (n = sum_d digit_d x 256^d, each digit in -128..127). The kernel sums
each digit's products separately, forms v = sum_d sum_d x 256^d exactly in int32 and rounds
v / 2^shift exactly: so the only error is that of the taps' rounding to 2^-shift, at most
``255 x sum |t - n / 2^shift|`` output steps (LSB). Taps that need no rounding (multiples of
1/256, say) are rounded half to even and so give exactly the CPU backend's float32 result
wherever that is exact; the others round halves up (an instruction fewer).

The tap fragments. The kernel's unit of work is 16 frame rows by ``8 x group`` output bytes
(``group`` n-tiles of 8 bytes). Each tap row dy reads ``words`` 4-byte words of its input row,
from word ``first_word`` relative to the unit's first output byte; the K x ``words`` pieces,
tap row by tap row, are dealt out 8 to an mma k-step (``steps`` of them, the last padded with
empty pieces): in step s, lane (g, t) (g = lane // 4, t = lane % 4) loads piece 8s + t into
registers a0/a1 (rows g, g + 8) and piece 8s + 4 + t into a2/a3, which are k = 4t..4t+3 and
16+4t..16+4t+3 of the m16n8k32 A operand. The B operand of n-tile j holds, for output byte
n = g of the tile, the digit of the tap that multiplies each of those input bytes, or 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

MAX_DIGITS = 3
"""The most int8 digits a tap may take (24-bit taps)."""

MAX_QUANT_ERROR = 0.25
"""The most, in output steps (LSB), that rounding the taps may move an output. Below 0.5 keeps the
result within 1 LSB of the CPU backend; 0.25 keeps outputs that differ from it rare (random 5 x 5
taps in 2 digits: about 0.1% of them, by 1) while most full-rank taps up to 7 x 7 fit 2 digits."""

MAX_SHIFT = 30
"""The largest power of two the taps are scaled by."""
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class IntegerTaps:
    """Taps as integers over a power of two.

    Attributes:
        values: (banks, K, K) int64 host array, n = round(t x 2^shift).
        shift: the power of two, 1..30.
        digits: signed base-256 digits per value (1..3).
        error: worst-case output error from the rounding, in LSB, the largest over the banks.
    """

    values: np.ndarray
    shift: int
    digits: int
    error: float

    def digit_planes(self) -> np.ndarray:
        """(digits, banks, K, K) int64 host array of signed digits, least significant first, each
        in -128..127, with sum_d planes[d] x 256^d == values."""
        rest = self.values.copy()
        planes = []
        for _ in range(self.digits):
            digit = ((rest + 128) & 255) - 128
            planes.append(digit)
            rest = (rest - digit) >> 8
        assert not rest.any()
        return np.stack(planes)


def digit_limit(digits: int) -> int:
    """The largest |n| that ``digits`` signed base-256 digits always hold."""
    return 127 * (256**digits - 1) // 255


def quantize(banks: Sequence[np.ndarray], max_error: float = MAX_QUANT_ERROR, *,
             min_digits: int = 1) -> IntegerTaps | None:
    """The integer form of ``banks`` (each (K, K), host NumPy, rounded to float32 as the GPU holds
    them): the fewest digits (from ``min_digits``) that hold the taps exactly, so exact taps stay
    exact; else the fewest whose worst-case error is at most ``max_error`` LSB; else None (3
    digits cannot hold them that closely, or their sums could overflow int32)."""
    taps = np.stack([np.asarray(b, np.float32).astype(np.float64) for b in banks])
    candidates = [c for c in (fit(taps, d) for d in range(min_digits, MAX_DIGITS + 1))
                  if c is not None]
    for wanted in (lambda c: c.error == 0, lambda c: c.error <= max_error):
        for candidate in candidates:
            if wanted(candidate):
                return candidate
    return None


def fit(taps: np.ndarray, digits: int) -> IntegerTaps | None:
    """``taps`` ((banks, K, K) float64 host array, not all zero) in ``digits`` digits at the
    largest shift whose values fit the digits and whose byte sums fit int32, or None if no shift
    from 1 does. The error is rounded taps' worst case, as in :class:`IntegerTaps`."""
    limit = digit_limit(digits)
    peak = float(np.abs(taps).max())
    shift = MAX_SHIFT if peak == 0 else min(MAX_SHIFT, int(np.floor(np.log2(limit / peak))))
    for shift in range(shift, 0, -1):
        found = at_shift(taps, shift, digits)
        if found is not None:
            return found
    return None


def at_shift(taps: np.ndarray, shift: int, digits: int) -> IntegerTaps | None:
    """``taps`` ((banks, K, K) float64 host array) as integers at ``shift`` in ``digits`` digits,
    with the rounding's worst-case error; None if a value exceeds the digits or a bank's byte
    sums could overflow int32."""
    values = np.round(taps * 2.0**shift).astype(np.int64)
    if np.abs(values).max() > digit_limit(digits) or \
            255 * np.abs(values).sum(axis=(1, 2)).max() > INT32_MAX:
        return None
    error = float(255 * np.abs(taps - values / 2.0**shift).sum(axis=(1, 2)).max())
    return IntegerTaps(values, shift, digits, error)


@dataclass(frozen=True)
class PieceLayout:
    """Where conv2d_tc.cu's A pieces come from, for one radius, channel count and group.

    Attributes:
        radius, channels, group: the specialisation (K = 2 x radius + 1).
        first_word: the first 4-byte word a tap row reads, relative to the unit's first output
            byte (negative: the left halo).
        words: words per tap row.
        steps: mma k-steps per unit (8 pieces each).
        ldmatrix: whether the kernel loads its pieces 16 bytes at a time with ldmatrix (its
            LDMATRIX): then ``words`` is a multiple of 4, so each group of 4 pieces is 16
            contiguous bytes of one row.
    """

    radius: int
    channels: int
    group: int
    first_word: int
    words: int
    steps: int
    ldmatrix: bool = False

    @property
    def size(self) -> int:
        return 2 * self.radius + 1

    def piece(self, step: int, half: int, t: int) -> tuple[int, int] | None:
        """(tap row dy, word w) of the piece that lane (., t) loads into a{2*half}/a{2*half+1} in
        ``step``, or None for a padding piece."""
        index = 8 * step + 4 * half + t
        if index >= self.size * self.words:
            return None
        return index // self.words, self.first_word + index % self.words


    def reaches(self, step: int, tile: int) -> bool:
        """Whether ``step`` holds an input byte that n-tile ``tile``'s outputs use (the kernel's
        step_reaches: it skips the mma otherwise)."""
        reach = self.channels * self.radius
        for index in range(8 * step, min(8 * step + 8, self.size * self.words)):
            word = self.first_word + index % self.words
            for delta in range(4 * word - 8 * tile - 7, 4 * word - 8 * tile + 4):
                if delta % self.channels == 0 and abs(delta) <= reach:
                    return True
        return False

    def mmas_per_unit(self, digits: int, banks: int = 1) -> int:
        """mma instructions per unit of 16 rows x 8 x group bytes (each 16 x 8 x 32 products)."""
        tiles = sum(self.reaches(s, j) for s in range(self.steps) for j in range(self.group))
        return tiles * digits * banks


def piece_layout(radius: int, channels: int, group: int = 1, ldmatrix: bool = False) -> PieceLayout:
    """The piece layout of conv2d_tc.cu (mirrors its kFirstWord, kWords and kSteps); ``ldmatrix``
    (its LDMATRIX, which needs an even group) pads each tap row to whole groups of 4 words."""
    reach = channels * radius
    first = -((reach + 3) // 4)
    last = (8 * group - 1 + reach) // 4
    words = last - first + 1
    if ldmatrix:
        words = -(-words // 4) * 4
    steps = -(-(2 * radius + 1) * words // 8)
    return PieceLayout(radius, channels, group, first, words, steps, ldmatrix)


LDMATRIX_RADII = (2,)
"""Radii the tensor-core plan runs one-bank stages at with ldmatrix loads and units of 16 bytes
(two n-tiles sharing their pieces): only there do the wide loads save more than the extra mma
k-steps of whole groups cost (benchmarks/README.md, "Where the tuning constants ... come from").
Two banks would double the B registers, so they keep the plain layout."""


def kernel_layout(radius: int, channels: int, banks: int = 1) -> PieceLayout:
    """The piece layout the tensor-core plan compiles conv2d_tc.cu with for this stage shape."""
    if radius in LDMATRIX_RADII and banks == 1:
        return piece_layout(radius, channels, group=2, ldmatrix=True)
    return piece_layout(radius, channels)


def products_per_frame(layout: PieceLayout, height: int, width: int, channels: int, digits: int,
                       banks: int = 1) -> int:
    """The int8 products conv2d_tc.cu's mma instructions issue for one H x W x C frame, padding
    included (16 x 8 x 32 each)."""
    units = -(-height // 16) * -(-width * channels // (8 * layout.group))
    return units * layout.mmas_per_unit(digits, banks) * 16 * 8 * 32


def band3_products_per_frame(height: int, width: int, channels: int, digits: int) -> int:
    """The int8 products conv3_tc.cu's mma instructions issue for one H x W x C frame, padding
    included: per 128 output bytes of a row and per digit, one m16n8k32 and one m16n8k16."""
    warps = -(-width * channels // 128)
    return height * warps * digits * 16 * 8 * (32 + 16)


def fragment_table(taps: IntegerTaps, layout: PieceLayout) -> np.ndarray:
    """``g_bfrag`` of conv2d_tc.cu: (banks, digits, group, steps, 2, 32) uint32 host array, the B
    register (b0 for half 0, b1 for half 1) of every lane for every n-tile and k-step; byte i of
    a word is the digit for input byte 4w + i of the lane's piece."""
    planes = taps.digit_planes()  # (digits, banks, K, K)
    digits, banks = planes.shape[:2]
    reach = layout.channels * layout.radius
    table = np.zeros((banks, digits, layout.group, layout.steps, 2, 32, 4), np.int64)
    for step in range(layout.steps):
        for half in range(2):
            for lane in range(32):
                n, t = lane // 4, lane % 4
                piece = layout.piece(step, half, t)
                if piece is None:
                    continue
                dy, word = piece
                for j in range(layout.group):
                    for i in range(4):
                        delta = 4 * word + i - (8 * j + n)  # input byte - output byte
                        if delta % layout.channels or abs(delta) > reach:
                            continue
                        dx = delta // layout.channels + layout.radius
                        table[:, :, j, step, half, lane, i] = planes[:, :, dy, dx].T
    return pack_words(table)


def band3_fragments(taps: IntegerTaps, channels: int) -> np.ndarray:
    """``g_bband`` of conv3_tc.cu for 3x3 taps of one bank: (digits, 3, 32) uint32 host array.

    Fragment 0 and 1 are lane (g, t)'s m16n8k32 B registers (k = 4t..4t+3 and 16+4t..16+4t+3 of
    column g), fragment 2 its m16n8k16 one (k = 4t..4t+3). Rows k 0..15 of the 32 x 8 matrix are
    tap row 0's band and 16..31 tap row 1's; the 16 x 8 matrix is tap row 2's. Band entry
    B[k][j] is tap column n's digit where k = 4 + j + (n - 1) x channels, else 0.
    """
    planes = taps.digit_planes()[:, 0]  # (digits, 3, 3)
    digits = planes.shape[0]
    band = np.zeros((digits, 3, 16, 8), np.int64)  # [digit][tap row][k][j]
    for j in range(8):
        for n in range(3):
            band[:, :, 4 + j + (n - 1) * channels, j] = planes[:, :, n]
    table = np.zeros((digits, 3, 32, 4), np.int64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for fragment in range(3):
            table[:, fragment, lane] = band[:, fragment, 4 * t:4 * t + 4, g]
    return pack_words(table)


def pack_words(values: np.ndarray) -> np.ndarray:
    """uint32 host array of shape ``values.shape[:-1]``: the last axis's 4 int8 values (any int
    dtype, two's complement) as the bytes of one little-endian word, value 0 in the low byte."""
    as_bytes = (values & 255).astype(np.uint32)
    words = as_bytes[..., 0] | as_bytes[..., 1] << 8 | as_bytes[...,
                                                                2] << 16 | as_bytes[..., 3] << 24
    return np.ascontiguousarray(words, np.uint32)
