"""Taps across frames: T x K x K float32 taps, their separable form, and the named temporal filters.

A temporal stage correlates over space and time at once (DESIGN semantics with a third index):

    out(t, y, x, c) = sum_{k, m, n} taps[k, m, n] * in(frame(t, k), y + m - R, x + n - R, c)

with ``frame(t, k) = t + k - T//2`` (centred: T//2 frames of look-ahead, so output t waits for
frame t + T//2) or ``t + k - (T - 1)`` (``causal``: past frames only, no added delay); frames
before the first or after the last are taken as the first or the last. Space is bordered as
for 2-D stages. Float32 accumulation, round half to even, saturation, as everywhere.

Frames whose K x K taps are all zero add nothing and are left out by every backend
(:attr:`TemporalTaps.used`). When the taps are a time profile times one spatial matrix
(``taps[k] = time[k] * space``), :attr:`TemporalTaps.time` and :attr:`TemporalTaps.space` hold
the two factors: the GPU then sums over time first and filters space once (the fast path).

This module sits below the filter registry (:mod:`streamconv.chain.filters` wraps these builders
into FilterStages) and imports nothing of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import FilterSpecError
from ..files.tapfiles import (MAX_ABS_TAP, MAX_SIZE, MAX_TAPS_FILE_BYTES, load_npy,
                              parse_inline_taps, validate_taps)

MAX_FRAMES = 15
"""Most frames a temporal stage spans (T odd, 1..15)."""


@dataclass(frozen=True)
class TemporalTaps:
    """A temporal stage's taps.

    Attributes:
        taps: (T, K, K) float32, C-contiguous and read-only (host), T and K odd.
        causal: the window ends at the output frame (``True``) or is centred on it.
        time, space: the separable factors, (T,) and (K, K) float32 host arrays with
            ``taps[k] == time[k] * space`` in float32, or None when the taps are not such a product.
    """

    taps: np.ndarray
    causal: bool = False
    time: np.ndarray | None = field(default=None, compare=False)
    space: np.ndarray | None = field(default=None, compare=False)

    @property
    def frames(self) -> int:
        """T, the frames the window spans."""
        return int(self.taps.shape[0])

    @property
    def size(self) -> int:
        """K, the side of each frame's tap matrix."""
        return int(self.taps.shape[1])

    @property
    def lookahead(self) -> int:
        """Frames after the output frame that it needs: T // 2 centred, 0 causal."""
        return 0 if self.causal else self.frames // 2

    @property
    def lookbehind(self) -> int:
        """Frames before the output frame that it reads: T // 2 centred, T - 1 causal."""
        return self.frames - 1 - self.lookahead

    @property
    def used(self) -> tuple[int, ...]:
        """The window positions k (0..T-1) whose taps are not all zero, in order."""
        return tuple(k for k in range(self.frames) if np.any(self.taps[k]))


def validate_taps3d(taps: Any, *, what: str = "conv3d taps", causal: bool = False) -> TemporalTaps:
    """Check T x K x K taps (T odd 1..15, K odd 1..31; each frame as :func:`validate_taps`).

    Args:
        taps: anything ``np.asarray`` makes a 3-D numeric array of (host memory).

    Raises:
        FilterSpecError: another shape, an even or too large T or K, or values a tap matrix
            may not hold.
    """
    array = np.asarray(taps) if not isinstance(taps, np.ndarray) else taps
    if array.ndim != 3:
        raise FilterSpecError(f"{what}: expected T x K x K taps (3-D), got shape {array.shape}")
    frames = array.shape[0]
    if frames % 2 == 0 or not 1 <= frames <= MAX_FRAMES:
        raise FilterSpecError(f"{what}: T must be odd and 1..{MAX_FRAMES}, got {frames}")
    planes = [validate_taps(plane, what=f"{what} (frame {k})") for k, plane in enumerate(array)]
    stacked = np.ascontiguousarray(np.stack(planes), np.float32)
    stacked.setflags(write=False)
    return with_factors(stacked, causal)


def with_factors(taps: np.ndarray, causal: bool, time: np.ndarray | None = None,
                 space: np.ndarray | None = None) -> TemporalTaps:
    """TemporalTaps for (T, K, K) float32 ``taps``, its factors found if not given (and checked if
    given: they are kept only where ``time[k] * space`` rounds to ``taps[k]`` exactly)."""
    if time is None or space is None:
        time, space = _factor(taps)
    if time is not None and space is not None:
        time, space = np.asarray(time, np.float32), np.asarray(space, np.float32)
        if not np.array_equal(time[:, None, None] * space[None], taps):
            time = space = None
    return TemporalTaps(taps, causal, time, space)


def _factor(taps: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(time, space) with ``taps[k] == time[k] * space``, taking ``space`` as the frame of the
    largest taps scaled to a unit peak, or (None, None) where that does not reproduce them."""
    peak = int(np.argmax(np.abs(taps).reshape(taps.shape[0], -1).max(axis=1)))
    plane = taps[peak].astype(np.float64)
    top = float(np.abs(plane).max())
    if top == 0:
        return None, None
    scale = float(plane.flat[int(np.argmax(np.abs(plane)))])
    space = (plane / scale).astype(np.float32)
    anchor = int(np.argmax(np.abs(space)))
    time = np.array([taps[k].flat[anchor] for k in range(taps.shape[0])], np.float32)
    return time, space


def _frames(value: int, what: str) -> int:
    if value % 2 == 0 or not 1 <= value <= MAX_FRAMES:
        raise FilterSpecError(f"{what}: frames must be odd and 1..{MAX_FRAMES}, got {value}")
    return value


def _profile(weights: np.ndarray, causal: bool, what: str,
             space: np.ndarray | None = None) -> TemporalTaps:
    """A time profile (T,) (float64) times ``space`` (K, K) (float64, default 1 x 1 of 1).

    Raises:
        FilterSpecError: a tap beyond MAX_ABS_TAP, as conv3d and the 2-D filters refuse (past
            float32's range it would be inf, and its sums NaN).
    """
    space = np.ones((1, 1)) if space is None else space
    largest = float(np.abs(weights).max() * np.abs(space).max())
    if largest > MAX_ABS_TAP:
        raise FilterSpecError(f"{what}: |tap| = {largest:g} exceeds {MAX_ABS_TAP:g}")
    time32, space32 = weights.astype(np.float32), space.astype(np.float32)
    taps = np.ascontiguousarray(time32[:, None, None] * space32[None], np.float32)
    taps.setflags(write=False)
    return with_factors(taps, causal, time32, space32)


def temporal_mean(frames: int, causal: bool) -> TemporalTaps:
    """``tmean``: the mean of ``frames`` frames (1/T each)."""
    frames = _frames(frames, "tmean")
    return _profile(np.full(frames, 1.0 / frames), causal, "tmean")


def gaussian_profile(sigma: float, frames: int, causal: bool, what: str = "tgauss") -> np.ndarray:
    """Normalised Gaussian weights over ``frames`` frames (float64, (T,)): centred on the middle
    frame, or for ``causal`` the newest half of the bell (weights by distance back from the
    last)."""
    if not (sigma > 0 and math.isfinite(sigma)):
        raise FilterSpecError(f"{what}: sigma must be a positive number, got {sigma:g}")
    offsets = np.arange(frames, dtype=np.float64)
    offsets -= frames - 1 if causal else (frames - 1) / 2
    width = max(sigma, 0.01)
    # width * width, not width ** 2: a float's ** raises OverflowError near 1e308, where the
    # product goes to inf and leaves every weight 1 (a flat window), as the 2-D gaussian does.
    weights = np.exp(-(offsets ** 2) / (2.0 * width * width))
    return weights / weights.sum()


def auto_frames(sigma: float, frames: int, what: str) -> int:
    """``frames``, or 2 * ceil(3 sigma) + 1 frames for 0, refused past MAX_FRAMES."""
    if frames == 0:
        # 3 * sigma is inf for sigma near 1e308: that needs inf frames (math.ceil cannot take it)
        wanted: float = (2 * math.ceil(3 * sigma) + 1 if math.isfinite(3 * sigma) else math.inf) \
            if sigma > 0 else 0
        if wanted > MAX_FRAMES:
            raise FilterSpecError(f"{what}: sigma={sigma:g} needs {wanted} frames > {MAX_FRAMES}; "
                                  f"pass frames={MAX_FRAMES} to truncate it")
        frames = max(int(wanted), 1)
    return _frames(frames, what)


def temporal_gaussian(sigma: float, frames: int, causal: bool) -> TemporalTaps:
    """``tgauss``: a Gaussian across frames (frames 0: 2 * ceil(3 sigma) + 1)."""
    frames = auto_frames(sigma, frames, "tgauss")
    return _profile(gaussian_profile(sigma, frames, causal), causal, "tgauss")


def temporal_derivative(scale: float, causal: bool) -> TemporalTaps:
    """``tdiff``: (next - previous) / 2 centred, newest - previous causal, times ``scale``."""
    if not math.isfinite(scale):
        raise FilterSpecError(f"tdiff: scale must be finite, got {scale}")
    weights = np.array([0.0, -1.0, 1.0]) if causal else np.array([-0.5, 0.0, 0.5])
    return _profile(weights * scale, causal, "tdiff")


def temporal_denoise(sigma: float, frames: int, space: float, causal: bool) -> TemporalTaps:
    """``tdenoise``: a temporal Gaussian times a small spatial Gaussian (separable)."""
    frames = auto_frames(sigma, frames, "tdenoise")
    if not (space > 0 and math.isfinite(space)):
        raise FilterSpecError(f"tdenoise: space must be a positive number, got {space:g}")
    size: float = 2 * math.ceil(3 * space) + 1 if math.isfinite(3 * space) else math.inf
    if size > MAX_SIZE:
        raise FilterSpecError(f"tdenoise: space={space:g} needs {size}x{size} taps, more than "
                              f"{MAX_SIZE}x{MAX_SIZE}")
    spatial = gaussian_profile(space, int(size), False, "tdenoise")
    time = gaussian_profile(sigma, frames, causal, "tdenoise")
    return _profile(time, causal, "tdenoise", np.outer(spatial, spatial))


def load_taps3d(taps: str, file: str, causal: bool, normalize: bool) -> TemporalTaps:
    """``conv3d``: taps from a T x K x K .npy file, or inline with frames split by ``|``."""
    if bool(taps) == bool(file):
        raise FilterSpecError("conv3d: give exactly one of taps=... (frames split by '|') or "
                              "file=PATH.npy")
    if file:
        array = load_npy(_npy_path(file), what="conv3d taps file", max_bytes=MAX_TAPS_FILE_BYTES)
    else:
        frames = [parse_inline_taps(text, what=f"conv3d taps (frame {k})")
                  for k, text in enumerate(taps.split("|"))]
        if len({frame.shape for frame in frames}) != 1:
            raise FilterSpecError("conv3d taps: frames of different sizes")
        array = np.stack(frames)
    if normalize:
        total = float(array.sum()) if array.size else 0.0
        if not math.isfinite(total) or abs(total) < 1e-12:
            raise FilterSpecError(f"conv3d: cannot normalize taps that sum to {total:g}")
        array = array / total
    return validate_taps3d(array, causal=causal)


def _npy_path(file: str) -> Path:
    """``file`` as a path, refused unless it names a .npy file."""
    path = Path(file)
    if path.suffix.lower() != ".npy":
        raise FilterSpecError(f"conv3d: file must be a .npy array of T x K x K taps, got "
                              f"{path.name!r}")
    return path


CAUSAL_HELP = "1: past frames only, no added delay (live sources); 0: centred"


@dataclass(frozen=True)
class TemporalType:
    """A temporal filter for the registry: its name, summary, builder and parameters, each
    (type, default, help) as :class:`streamconv.chain.filters.Param` takes them."""

    name: str
    summary: str
    build: Callable[..., TemporalTaps]
    params: Mapping[str, tuple[type, Any, str]]


TEMPORAL_TYPES: tuple[TemporalType, ...] = (
    TemporalType("tmean", "mean across frames", temporal_mean,
                 {"frames": (int, 3, f"odd window, 1..{MAX_FRAMES} frames"),
                  "causal": (bool, False, CAUSAL_HELP)}),
    TemporalType("tgauss", "Gaussian across frames", temporal_gaussian,
                 {"sigma": (float, 1.0, "standard deviation in frames"),
                  "frames": (int, 0, "odd window; default 2*ceil(3*sigma)+1"),
                  "causal": (bool, False, CAUSAL_HELP + " (the newest half of the bell)")}),
    TemporalType("tdiff", "temporal derivative: (next - previous) / 2; negative responses clip "
                 "to 0", temporal_derivative,
                 {"scale": (float, 1.0, "gain; -1 shows what darkens instead of what brightens"),
                  "causal": (bool, False, CAUSAL_HELP + " (newest - previous)")}),
    TemporalType("tdenoise", "denoiser: a Gaussian across frames times a spatial Gaussian "
                 "(separable)", temporal_denoise,
                 {"sigma": (float, 1.0, "standard deviation in frames"),
                  "frames": (int, 0, "odd window; default 2*ceil(3*sigma)+1"),
                  "space": (float, 0.5, "spatial standard deviation in pixels"),
                  "causal": (bool, False, CAUSAL_HELP)}),
    TemporalType("conv3d", "your own T x K x K taps across frames (T odd <= 15, K odd <= 31)",
                 load_taps3d,
                 {"taps": (str, "", "frames split by '|', rows by ';', values by ','"),
                  "file": (str, "", "path of a .npy of T x K x K taps"),
                  "causal": (bool, False, CAUSAL_HELP),
                  "normalize": (bool, False, "divide the taps by their sum")}),
)
"""The temporal filters, in the order ``streamconv filters`` lists them."""

TEMPORAL_NAMES = frozenset(entry.name for entry in TEMPORAL_TYPES)
"""The registry names of the filters across frames (tests/backends/test_temporal.py covers them)."""
