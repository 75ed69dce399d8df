"""The CPU reference of the geometry stages (``scale``, ``crop``): what
:mod:`streamconv.chain.resample`
defines, computed in NumPy float32 in the defined order, so the GPU's kernel can equal it exactly.

Every product and every sum is one float32 NumPy operation (no fused multiply-add): the
horizontal pass adds ``weights[:, t] * source[:, start + t]`` for t = 0, 1, ... into float32
sums, the vertical pass does the same down the rows of those sums, and the result is rounded
half to even and saturated. Bands of output rows run on the CPU backend's thread pool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ...chain.resample import AxisTaps, Geometry, axis_taps

MAX_PHASES = 8
"""Most distinct weight sets per axis for which the horizontal pass runs phase by phase on
strided views instead of gathering columns."""

_BAND_ROWS = 32
"""Output rows per band: a band's float32 sums stay in cache."""


def geometry_into(dst: np.ndarray, src: np.ndarray, geometry: Geometry,
                  run_bands: Callable[[Callable[[int], None], Sequence[int]], None]) -> None:
    """Run one geometry stage: ``dst`` (h, w, C) from ``src`` (H, W, C), host arrays of one dtype
    (uint8 or uint16), ``dst``'s shape ``geometry.output_shape(src.shape)``.

    Args:
        run_bands: calls a function once per band start, maybe in parallel (the CPU backend's).
    """
    if geometry.kind == "crop":
        x, y, width, height = geometry.window(src.shape)
        np.copyto(dst, src[y:y + height, x:x + width])
        return
    rows = axis_taps(geometry.kernel, src.shape[0], dst.shape[0])
    columns = axis_taps(geometry.kernel, src.shape[1], dst.shape[1])
    maximum = np.iinfo(dst.dtype).max

    def band(start: int) -> None:
        stop = min(start + _BAND_ROWS, dst.shape[0])
        first = int(rows.start[start])  # the band's first source row (may lie above the frame)
        count = int(rows.start[stop - 1]) + rows.taps - first
        source = src[np.clip(np.arange(first, first + count), 0, src.shape[0] - 1)]
        sums = horizontal_sums(source, columns)
        acc = vertical_sums(sums, rows, start, stop, first)
        np.rint(acc, out=acc)
        np.clip(acc, 0, maximum, out=acc)
        np.copyto(dst[start:stop], acc, casting="unsafe")

    run_bands(band, range(0, dst.shape[0], _BAND_ROWS))


def period(taps: AxisTaps, length: int) -> tuple[int, int] | None:
    """(q, p) when the taps repeat every q outputs, p source pixels further on (a ratio p / q in
    lowest terms, q <= MAX_PHASES), with bit-identical weights; else None."""
    outputs = len(taps.start)
    q = outputs // math.gcd(length, outputs)
    p = length // math.gcd(length, outputs)
    if q > MAX_PHASES or q >= outputs:
        return None
    if not (np.array_equal(taps.weights[q:], taps.weights[:-q])
            and np.all(taps.start[q:].astype(np.int64) - taps.start[:-q] == p)):
        return None
    return q, p


def _edge_padded(source: np.ndarray, taps: AxisTaps, axis: int) -> tuple[np.ndarray, int]:
    """``source`` with its edge pixels repeated along ``axis`` as far as the taps read beyond
    it, and the number of pixels added before index 0."""
    length = source.shape[axis]
    before = max(0, -int(taps.start.min()))
    after = max(0, int(taps.start.max()) + taps.taps - length)
    if not before and not after:
        return source, 0
    pad = [(0, 0)] * source.ndim
    pad[axis] = (before, after)
    return np.pad(source, pad, mode="edge"), before


def _accumulate(target: np.ndarray, product: np.ndarray, tap: int, samples: np.ndarray,
                weight) -> None:
    """target (+)= samples * weight, float32: the product goes to ``target`` for the first tap."""
    np.multiply(samples, weight, out=target if tap == 0 else product)
    if tap:
        np.add(target, product, out=target)


def horizontal_sums(source: np.ndarray, columns: AxisTaps) -> np.ndarray:
    """The horizontal pass: (R, W, C) uint8 or uint16 host rows -> (R, w, C) float32 sums,
    ``sums[:, o] = sum_t columns.weights[o, t] * source[:, clamp(columns.start[o] + t)]``."""
    rows, width, channels = source.shape
    outputs = len(columns.start)
    sums = np.empty((rows, outputs, channels), np.float32)
    repeats = period(columns, width)
    if repeats is None:  # each output its own weights: gather the columns of each tap
        gathered = np.empty((rows, outputs, channels), source.dtype)
        product = np.empty_like(sums)
        for tap in range(columns.taps):
            np.take(source, np.clip(columns.start + tap, 0, width - 1), axis=1, out=gathered)
            _accumulate(sums, product, tap, gathered, columns.weights[:, tap][None, :, None])
        return sums
    q, p = repeats  # outputs phase, phase + q, ... share their weights: strided views, no gather
    padded, before = _edge_padded(source, columns, 1)
    for phase in range(q):
        count = len(range(phase, outputs, q))
        target, product = sums[:, phase::q], np.empty((rows, count, channels), np.float32)
        first = int(columns.start[phase]) + before
        for tap in range(columns.taps):
            view = padded[:, first + tap:first + tap + p * (count - 1) + 1:p]
            _accumulate(target, product, tap, view, columns.weights[phase, tap])
    return sums


def vertical_sums(sums: np.ndarray, rows: AxisTaps, start: int, stop: int,
                  first: int) -> np.ndarray:
    """The vertical pass for output rows start..stop: (stop - start, w, C) float32, from the
    horizontal sums of source rows first, first + 1, ... (``sums``, float32 host)."""
    offsets = rows.start[start:stop].astype(np.int64) - first
    acc = np.empty((stop - start,) + sums.shape[1:], np.float32)
    product = np.empty_like(acc)
    for tap in range(rows.taps):
        weight = rows.weights[start:stop, tap][:, None, None]
        _accumulate(acc, product, tap, sums[offsets + tap], weight)
    return acc
