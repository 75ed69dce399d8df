"""How each filter stage runs on the CPU backend, decided once per stage and sample type: a
table, OpenCV's filter straight from the frame's depth, row and column passes, or the
reference's float32 sums (and with which rounding and bands)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain.filters import COMBINE_MAGNITUDE, FilterStage
from ...frames.checks import sample_maximum
from ..families import separable
from ..families.rank1 import SeparableTaps, factor_separable
from ..plan import AUTO

# cv2.filter2D switches to a DFT (inexact) once the kernel area reaches 50 on some builds;
# larger kernels are summed from 1 x K rows, each well under that.
DIRECT_MAX_AREA = 49

# float32 holds every multiple of 1/256 up to 2^16 in magnitude exactly.
_EXACT_LIMIT = 1 << 16

# cv2's float -> uint8 conversion rounds half to even (cvRound) and saturates, but passes
# through int32 (2^31 and beyond would come out as 0): used only below this bound.
_CV_ROUND_LIMIT = float(1 << 30)

CPU_SEPARABLE = separable.VARIANTS[0]
"""The one kernel name the cpu backend runs besides ``auto`` (see :class:`CpuBackend`)."""

# Rows per band of the float32 path: small enough that a band's buffers stay in cache,
# large enough that the Python calls per band do not matter. Kernels of area > 49 add up K
# row passes per band, each add a pass over the band: those run fastest in smaller bands
# (measured on 1080p, 9x9 to 15x15: 24 rows about 15% less CPU than 64).
BAND_ROWS = 64
SUM_BAND_ROWS = 24


def _is_exact(taps: np.ndarray, maximum: int = 255) -> bool:
    """Every tap a multiple of 1/256 and maximum * sum|taps| <= 2^16: then every product and every
    partial sum over samples up to ``maximum``, in any order, is a multiple of 1/256 within 2^16,
    exact in float32."""
    scaled = taps.astype(np.float64) * 256
    return bool(np.array_equal(scaled, np.round(scaled))
                and maximum * np.abs(taps).sum() <= _EXACT_LIMIT)


def first_equal_rows(taps: np.ndarray) -> tuple[int, ...]:
    """For each row of ``taps``, the first row it shares a filter pass with, else itself.

    Equal rows (a box kernel, zero rows, the two halves of a symmetric kernel) are filtered
    once, over the padded rows all their uses read: in bands of ``SUM_BAND_ROWS`` rows this
    takes about 12% less CPU on 13x13 and 15x15 Gaussians than one pass per row.
    """
    rows = [bytes(row) for row in taps]
    return tuple(rows.index(row) for row in rows)


@dataclass(frozen=True)
class StagePlan:
    """How one stage runs, decided once per stage.

    Attributes:
        dtype: the frames' sample type, uint8 or uint16.
        table: for 1 x 1 taps, the whole stage as a table of every sample value (256 or 65536
            entries of ``dtype``), computed with the reference's own float32 operations (so
            equal by construction); else None.
        identity: ``table`` maps every value to itself (a copy is enough).
        direct: a single exact tap matrix of area <= 49: ``cv2.filter2D`` from the frame's
            depth straight to it with OpenCV's border; it rounds half to even and saturates like
            ``np.rint`` and ``np.clip``, and exact sums leave nothing to round differently.
        cv_round: |result| < 2^30, so OpenCV's conversions round and saturate (cvRound passes
            through int32): ``cv2.convertScaleAbs`` of max(acc, 0) into uint8, ``cv2.add(acc,
            0.0, dtype=CV_16U)`` into uint16.
        first_rows: per tap matrix of area > 49, ``first_equal_rows`` (rows filtered together).
        band_rows: rows per band of the float32 path.
        separable: the row and column factors of the taps when the stage runs as two 1-D
            passes (``cv2.sepFilter2D``), else (): with ``kernel="separable"`` (rank-1 taps of
            any precision: within 1 of the reference, see :class:`CpuBackend`), or for taps of
            area > 49 whose factors are exact (no pass can round: the reference's bytes).
    """

    dtype: np.dtype
    table: np.ndarray | None
    identity: bool
    direct: bool
    cv_round: bool
    first_rows: tuple[tuple[int, ...], ...]
    band_rows: int
    separable: tuple[SeparableTaps, ...]


def round_reference(dst: np.ndarray, acc: np.ndarray) -> None:
    """dst = clip(rint(acc), 0, max of dst's dtype): the reference rounding, for any magnitude
    (acc is overwritten)."""
    np.rint(acc, out=acc)
    np.clip(acc, 0, sample_maximum(dst.dtype), out=acc)
    np.copyto(dst, acc, casting="unsafe")


def magnitude_reference(gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """sqrt(gx*gx + gy*gy) in float32, rounded as the reference rounds it; overwrites both,
    returns gx."""
    np.multiply(gx, gx, out=gx)
    np.multiply(gy, gy, out=gy)
    np.add(gx, gy, out=gx)
    return np.sqrt(gx, out=gx)


def separable_factors(stage: FilterStage, kernel: str,
                      dtype: np.dtype) -> tuple[SeparableTaps, ...]:
    """:attr:`StagePlan.separable` for ``stage`` under ``kernel`` (``auto`` or ``separable``).

    Raises:
        FilterSpecError: ``separable`` for a bank or for taps that are not rank 1.
    """
    if stage.size == 1:
        return ()
    if kernel == CPU_SEPARABLE:
        return (separable.prepare(stage, kernel, dtype.itemsize),)
    taps = stage.taps[0]
    large = stage.size ** 2 > DIRECT_MAX_AREA
    if len(stage.taps) > 1 or not large or not _is_exact(taps, sample_maximum(dtype)):
        return ()
    factors = factor_separable(taps)
    return (factors,) if factors is not None and factors.exact else ()


def make_plan(stage: FilterStage, dtype=np.uint8, kernel: str = AUTO) -> StagePlan:
    """Decide how ``stage`` runs on frames of ``dtype`` (uint8 or uint16) with ``kernel``
    (``auto`` or ``separable``; see :class:`StagePlan`).

    Raises:
        FilterSpecError: ``separable`` for a bank or for taps that are not rank 1.
    """
    dtype = np.dtype(dtype)
    maximum = sample_maximum(dtype)
    taps = stage.taps
    magnitude = stage.combine == COMBINE_MAGNITUDE
    reach = maximum * sum(float(np.abs(t).sum()) for t in taps)  # bounds |sum| and the magnitude
    table = None
    if stage.size == 1:
        values = np.arange(maximum + 1, dtype=np.float32)
        sums = [values * np.float32(t[0, 0]) for t in taps]
        acc = magnitude_reference(*sums) if magnitude else sums[0]
        table = np.empty(maximum + 1, dtype)
        round_reference(table, acc)
    exact = all(_is_exact(t, maximum) for t in taps)
    large = stage.size ** 2 > DIRECT_MAX_AREA
    factors = separable_factors(stage, kernel, dtype)
    return StagePlan(
        dtype=dtype,
        table=table,
        identity=table is not None and np.array_equal(table, np.arange(maximum + 1)),
        direct=exact and not magnitude and not large and not factors,
        cv_round=reach < _CV_ROUND_LIMIT,
        first_rows=tuple(first_equal_rows(t) for t in taps) if large else (),
        band_rows=SUM_BAND_ROWS if large and not factors else BAND_ROWS,
        separable=factors,
    )
