"""The test oracle: a plain NumPy float64 correlation, independent of streamconv's own code."""

from __future__ import annotations

import math

import numpy as np


def reference_index(position: int, length: int, border: str) -> int | None:
    """Where a 1-D read at ``position`` lands (None: a zero pixel), by repeated reflection."""
    if 0 <= position < length:
        return position
    if border == "zero":
        return None
    if border == "replicate":
        return min(max(position, 0), length - 1)
    if length == 1:
        return 0
    while not 0 <= position < length:
        position = -position if position < 0 else 2 * length - 2 - position
    return position


def reference_sums(frame: np.ndarray, taps: np.ndarray, border: str) -> np.ndarray:
    """sum_{m,n} taps[m, n] * frame[y+m-R, x+n-R] in float64: (H, W, C) -> (H, W, C)."""
    frame = frame if frame.ndim == 3 else frame[:, :, None]
    height, width, channels = frame.shape
    size = taps.shape[0]
    radius = size // 2
    acc = np.zeros((height, width, channels), np.float64)
    source = frame.astype(np.float64)
    for m in range(size):
        rows = [reference_index(y + m - radius, height, border) for y in range(height)]
        for n in range(size):
            cols = [reference_index(x + n - radius, width, border) for x in range(width)]
            shifted = np.zeros_like(acc)
            row_ok = np.array([r is not None for r in rows])
            col_ok = np.array([c is not None for c in cols])
            r_idx = np.array([r or 0 for r in rows])
            c_idx = np.array([c or 0 for c in cols])
            shifted[:] = source[np.ix_(r_idx, c_idx)]
            shifted[~row_ok] = 0
            shifted[:, ~col_ok] = 0
            acc += float(taps[m, n]) * shifted
    return acc


def reference_filter(frame: np.ndarray, stage, border: str) -> np.ndarray:
    """One streamconv FilterStage stage on an (H, W[, C]) uint8 or uint16 frame, in float64,
    rounded half to even and saturated to the frame's dtype."""
    sums = [reference_sums(frame, np.asarray(t, np.float64), border) for t in stage.taps]
    if stage.combine == "magnitude":
        acc = np.sqrt(sums[0] ** 2 + sums[1] ** 2)
    else:
        acc = sums[0]
    out = np.clip(np.rint(acc), 0, np.iinfo(frame.dtype).max).astype(frame.dtype)
    return out.reshape(frame.shape)


def reference_chain(frame: np.ndarray, stages, border: str) -> np.ndarray:
    """Several stages, each rounding to the frame's dtype, as the backends do."""
    for stage in stages:
        frame = reference_filter(frame, stage, border)
    return frame


def random_taps(rng: np.random.Generator, size: int, *, exact: bool) -> np.ndarray:
    """Random (size, size) taps whose sum is about 1; ``exact``: every tap a multiple of 1/256."""
    taps = rng.normal(0.0, 1.0, (size, size)) / size
    taps[size // 2, size // 2] += 1.0
    if exact:
        taps = np.round(taps * 256) / 256
    return taps


def exact_for(taps: np.ndarray, maximum: int) -> bool:
    """Every tap a multiple of 1/256 and maximum * sum|taps| <= 2^16: float32 sums over samples
    up to ``maximum`` are then exact in any order, so every backend must give the same samples."""
    scaled = np.asarray(taps, np.float64) * 256
    return bool(np.array_equal(scaled, np.round(scaled))
                and maximum * np.abs(taps).sum() <= 1 << 16)


def _resize_kernel(kernel: str, x: float) -> float:
    """The continuous resampling kernels, written out in float64: Lanczos-3, Keys' cubic
    (a = -0.5) and the triangle."""
    x = abs(x)
    if kernel == "lanczos3":
        if x == 0:
            return 1.0
        if x >= 3:
            return 0.0
        return 3 * math.sin(math.pi * x) * math.sin(math.pi * x / 3) / (math.pi * x) ** 2
    if kernel == "bicubic":
        a = -0.5
        if x < 1:
            return (a + 2) * x**3 - (a + 3) * x**2 + 1
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a if x < 2 else 0.0
    return max(0.0, 1.0 - x)


def resize_matrix(kernel: str, n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) float64: the weight of every source pixel in each output of one axis,
    half-pixel centres, the kernel stretched by the ratio when shrinking, taps beyond the frame
    given to its edge pixel, each row summing to 1; ``area``: the share of the output's
    footprint each pixel covers."""
    ratio = n_in / n_out
    matrix = np.zeros((n_out, n_in))
    for o in range(n_out):
        if kernel == "area":
            low, high = o * ratio, (o + 1) * ratio
            for j in range(math.floor(low), math.ceil(high)):
                matrix[o, min(j, n_in - 1)] += max(0.0, min(j + 1, high) - max(j, low))
        else:
            stretch, centre = max(ratio, 1.0), (o + 0.5) * ratio
            reach = 4 * math.ceil(stretch) + 2
            for j in range(math.floor(centre) - reach, math.ceil(centre) + reach):
                weight = _resize_kernel(kernel, (j + 0.5 - centre) / stretch)
                matrix[o, min(max(j, 0), n_in - 1)] += weight
        matrix[o] /= matrix[o].sum()
    return matrix


def reference_resize(frame: np.ndarray, width: int, height: int, kernel: str) -> np.ndarray:
    """An (H, W[, C]) uint8 or uint16 frame resampled to (height, width[, C]) in float64, rounded
    half to even and saturated to the frame's dtype."""
    source = frame.astype(np.float64)
    rows = resize_matrix(kernel, frame.shape[0], height)
    columns = resize_matrix(kernel, frame.shape[1], width)
    down = np.tensordot(rows, source, axes=(1, 0))  # (height, W, C)
    result = np.tensordot(columns, down, axes=(1, 1)).swapaxes(0, 1)
    return np.clip(np.rint(result), 0, np.iinfo(frame.dtype).max).astype(frame.dtype)


def reference_temporal(clip: np.ndarray, stage, border: str) -> np.ndarray:
    """One temporal stage over a whole clip, (N, H, W, C) uint8 or uint16, in float64: output t
    sums taps[k] over frame t + k - lookbehind (the first or last frame beyond the clip),
    rounded half to even and saturated."""
    taps = np.asarray(stage.temporal.taps, np.float64)
    frames = taps.shape[0]
    behind = frames - 1 if stage.temporal.causal else frames // 2
    count = clip.shape[0]
    sums = {}  # (frame index, k) -> the frame's 2-D sums with taps[k]
    out = np.empty_like(clip)
    for t in range(count):
        acc = np.zeros(clip.shape[1:], np.float64)
        for k in range(frames):
            source = min(max(t + k - behind, 0), count - 1)
            if (source, k) not in sums:
                sums[source, k] = reference_sums(clip[source], taps[k], border)
            acc += sums[source, k]
        out[t] = np.clip(np.rint(acc), 0, np.iinfo(clip.dtype).max).astype(clip.dtype)
    return out


def reference_clip(clip: np.ndarray, stages, border: str) -> np.ndarray:
    """A chain of 2-D and temporal stages over a clip (N, H, W, C), each rounding to its dtype."""
    for stage in stages:
        if stage.temporal is not None:
            clip = reference_temporal(clip, stage, border)
        else:
            clip = np.stack([reference_filter(frame, stage, border) for frame in clip])
    return clip
