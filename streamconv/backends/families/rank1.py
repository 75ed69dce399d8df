"""Rank-1 (separable) tap matrices: detection and the factors a row pass and a column pass use.

A K x K matrix T is separable when T[m][n] = V[m] * H[n]; filtering rows with H and then
columns with V costs 2K multiply-adds per output instead of K^2. Two cases:

- Exact taps (every tap a multiple of 1/256, with the CPU backend's bound on their sum):
  the 2D result is exact in float32, so the factors must be exact too. T * 256 is then an
  integer matrix; if it is rank 1 it factors into integer vectors p and q (q with no common
  divisor), and H = q, V = p / 256 make every product and partial sum of both passes exact,
  so the separable output equals the 2D output byte for byte.
- Other taps: the leading singular pair of T, accepted when V * H reproduces every tap within
  a relative 1e-6 of the largest; the outputs then differ from the 2D ones by float
  rounding only (within 1 LSB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

# V x H must reproduce T within this fraction of max|T| (float32 taps carry ~6e-8).
RANK1_TOLERANCE = 1e-6

# The CPU backend's exactness bound: 255 * sum|T| within 2^16 keeps every float32 sum exact.
_EXACT_LIMIT = 1 << 16


@dataclass(frozen=True)
class SeparableTaps:
    """Factors of a rank-1 tap matrix: ``taps[m][n] == column[m] * row[n]`` (approximately, or
    exactly when ``exact``).

    Attributes:
        row: (K,) float32 host array, the taps of the row (horizontal) pass.
        column: (K,) float32 host array, the taps of the column (vertical) pass.
        exact: both passes are exact in float32 (output equals the 2D one byte for byte).
    """

    row: np.ndarray
    column: np.ndarray
    exact: bool


def _exact_factors(taps: np.ndarray) -> SeparableTaps | None:
    """Integer factors of 256 * taps when the taps are exact and the integer matrix is rank 1."""
    scaled = taps.astype(np.float64) * 256
    if not np.array_equal(scaled, np.round(scaled)) or \
            255 * np.abs(taps.astype(np.float64)).sum() > _EXACT_LIMIT:
        return None
    whole = np.round(scaled).astype(np.int64)
    if not whole.any():
        return None
    pivot_row = int(np.argmax(np.abs(whole).sum(axis=1)))
    row = whole[pivot_row]
    divisor = reduce(math.gcd, (int(v) for v in row if v))
    row = row // divisor
    pivot_col = int(np.argmax(np.abs(row)))
    if np.any(whole[:, pivot_col] % row[pivot_col]):
        return None
    column = whole[:, pivot_col] // row[pivot_col]
    if not np.array_equal(np.outer(column, row), whole):
        return None
    return SeparableTaps(row=row.astype(np.float32), column=(column / 256.0).astype(np.float32),
                         exact=True)


def factor_separable(taps: np.ndarray) -> SeparableTaps | None:
    """The row and column factors of a K x K tap matrix, or None when it is not rank 1.

    Args:
        taps: (K, K) float32 host array.
    """
    if taps.ndim != 2 or taps.shape[0] != taps.shape[1] or not np.all(np.isfinite(taps)):
        return None
    exact = _exact_factors(taps)
    if exact is not None:
        return exact
    target = taps.astype(np.float64)
    largest = float(np.abs(target).max())
    if largest == 0.0:
        return None
    left, singular, right = np.linalg.svd(target)
    scale = math.sqrt(singular[0])
    column, row = left[:, 0] * scale, right[0] * scale
    if row[np.argmax(np.abs(row))] < 0:  # a sign convention, so the factors are reproducible
        column, row = -column, -row
    row32, column32 = row.astype(np.float32), column.astype(np.float32)
    error = np.abs(np.outer(column32.astype(np.float64), row32.astype(np.float64)) - target).max()
    if error > RANK1_TOLERANCE * largest:
        return None
    return SeparableTaps(row=row32, column=column32, exact=False)
