"""The test oracle: a plain NumPy float64 correlation, independent of streamconv's own code."""

from __future__ import annotations

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
    return bool(np.array_equal(scaled, np.round(scaled)) and maximum * np.abs(taps).sum() <= 1 << 16)


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
