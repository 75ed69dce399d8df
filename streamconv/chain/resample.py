"""Scale and crop stages: what they mean, the size they give a frame, and the resampling taps.

A *geometry* stage changes the frame's size; it has no tap matrix. ``crop`` cuts a w x h
window out at (x, y). ``scale`` resamples to w x h as a separable polyphase convolution, the
horizontal pass first, then the vertical one, defined here and nowhere else:

- Sample centres are at half-pixel positions (OpenCV's, FFmpeg's and PIL's convention): output
  pixel ``o`` of an axis from ``n_in`` to ``n_out`` pixels sits at source coordinate
  ``(o + 0.5) * n_in / n_out``, where source pixel ``j`` spans ``[j, j + 1)``.
- Downscaling widens the kernel by the ratio (antialiasing, as PIL and FFmpeg's swscale do):
  ``lanczos3`` (sinc(x) sinc(x/3), |x| < 3), ``bicubic`` (Keys' cubic with a = -0.5, |x| < 2),
  ``bilinear`` (the triangle, |x| < 1) are evaluated at ``(j + 0.5 - centre) / max(ratio, 1)``;
  ``area`` weighs each source pixel by how much of it the output pixel's footprint
  ``[o, o + 1) * ratio`` covers. Each output's weights are normalized to sum 1 in float64, then
  rounded to float32 (:func:`axis_taps`): that table *is* the filter.
- Source pixels beyond the frame read as the nearest edge pixel (replicate; ``--border`` does
  not apply to geometry stages).
- Arithmetic: float32, each product and each sum rounded (no fused multiply-add), the taps of an
  output summed in order of increasing source index, the horizontal sums kept in float32 for the
  vertical pass; the result rounded half to even and saturated to the frame's range.

A frame is reduced at most :data:`MAX_REDUCTION` times along an axis in one stage (chain two
scale stages for more), and no output side exceeds :data:`MAX_SIDE`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import FilterSpecError, FrameFormatError

KERNELS = ("lanczos3", "bicubic", "bilinear", "area")
"""Resampling kernels of ``scale``, the default first."""

MAX_REDUCTION = 16
"""Largest input / output size ratio of one scale stage along an axis."""

MAX_SIDE = 16384
"""Largest output width or height of a scale stage."""

KEEP, ASPECT, ASPECT_EVEN = 0, -1, -2
"""Special sizes of ``scale`` (FFmpeg's): the input's own; from the other side by the input's
aspect ratio; the same rounded to an even number."""

CENTRED = -1
"""``crop``'s x or y for a window centred on the frame (FFmpeg's default)."""


@dataclass(frozen=True)
class Geometry:
    """What a scale or crop stage does, before the input's size is known.

    Attributes:
        kind: ``"scale"`` or ``"crop"``.
        width, height: the output size; for scale also KEEP, ASPECT or ASPECT_EVEN; for crop 0
            means "to the frame's edge".
        kernel: scale's resampling kernel (one of :data:`KERNELS`); empty for crop.
        x, y: crop's top-left corner, or CENTRED.
    """

    kind: str
    width: int
    height: int
    kernel: str = ""
    x: int = 0
    y: int = 0

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (h, w, C) a frame of (H, W, C) ``shape`` comes out as.

        Raises:
            FrameFormatError: a crop window beyond the frame, a reduction over MAX_REDUCTION or
                an output side over MAX_SIDE.
        """
        if self.kind == "crop":
            width, height = self.window(shape)[2:]
            return height, width, shape[2]
        width, height = self._scaled_size(shape[1], shape[0])
        for axis, before, after in (("width", shape[1], width), ("height", shape[0], height)):
            if after > MAX_SIDE:
                raise FrameFormatError(f"scale: output {axis} {after} exceeds {MAX_SIDE}")
            if before > MAX_REDUCTION * after:
                raise FrameFormatError(
                    f"scale: {axis} {before} -> {after} reduces {before / after:.1f}x, at most "
                    f"{MAX_REDUCTION}x in one stage (chain two scale stages)")
        return height, width, shape[2]

    def _scaled_size(self, width_in: int, height_in: int) -> tuple[int, int]:
        """Scale's (w, h) for an input of width_in x height_in: KEEP and ASPECT resolved."""
        width = width_in if self.width == KEEP else self.width
        height = height_in if self.height == KEEP else self.height
        if width < 0:
            width = _aspect(height * width_in, height_in, self.width == ASPECT_EVEN)
        if height < 0:
            height = _aspect(width * height_in, width_in, self.height == ASPECT_EVEN)
        return width, height

    def window(self, shape: tuple[int, int, int]) -> tuple[int, int, int, int]:
        """Crop's (x, y, w, h) within a frame of (H, W, C) ``shape``.

        Raises:
            FrameFormatError: the window does not lie within the frame.
        """
        frame_height, frame_width = shape[0], shape[1]
        width = self.width or frame_width - max(self.x, 0)
        height = self.height or frame_height - max(self.y, 0)
        x = (frame_width - width) // 2 if self.x == CENTRED else self.x
        y = (frame_height - height) // 2 if self.y == CENTRED else self.y
        inside = 0 <= x and 0 <= y and x + width <= frame_width and y + height <= frame_height
        if width < 1 or height < 1 or not inside:
            raise FrameFormatError(f"crop: window {width}x{height} at ({x}, {y}) does not lie "
                                   f"within the {frame_width}x{frame_height} frame")
        return x, y, width, height

    def describe(self) -> str:
        """The stage's parameters as a spec reads them."""
        if self.kind == "crop":
            return f"crop:x={self.x},y={self.y},w={self.width},h={self.height}"
        return f"scale:w={self.width},h={self.height},kernel={self.kernel}"


def _aspect(numerator: int, denominator: int, even: bool) -> int:
    """A side computed from the other by the aspect ratio, ``numerator / denominator`` exactly:
    the nearest integer (with ``even``, twice the nearest integer to its half), halves rounded
    up as FFmpeg's scale rounds them (not Python's round, which rounds them to even); >= 1, or
    >= 2 with ``even``."""
    if even:
        return max(2, 2 * ((numerator + denominator) // (2 * denominator)))
    return max(1, (2 * numerator + denominator) // (2 * denominator))


def scale_geometry(w: int, h: int, kernel: str) -> Geometry:
    """The ``scale`` stage's geometry from its parameters, checked.

    Raises:
        FilterSpecError: an unknown kernel, a size below ASPECT_EVEN or over MAX_SIDE, or both
            sides from the aspect ratio.
    """
    if kernel not in KERNELS:
        raise FilterSpecError(f"scale: unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    for name, value in (("w", w), ("h", h)):
        if not ASPECT_EVEN <= value <= MAX_SIDE:
            raise FilterSpecError(f"scale: {name} must be 1..{MAX_SIDE}, or 0 (the input's), -1 "
                                  f"(by the aspect ratio) or -2 (the same, even); got {value}")
    if w < 0 and h < 0:
        raise FilterSpecError("scale: w and h cannot both follow the aspect ratio")
    return Geometry("scale", w, h, kernel)


def crop_geometry(x: int, y: int, w: int, h: int) -> Geometry:
    """The ``crop`` stage's geometry from its parameters, checked (against a frame: when it comes).

    Raises:
        FilterSpecError: a negative size, or a corner below CENTRED.
    """
    if w < 0 or h < 0:
        raise FilterSpecError(f"crop: w and h must be >= 1, or 0 (to the frame's edge); "
                              f"got {w}x{h}")
    if x < CENTRED or y < CENTRED:
        raise FilterSpecError(f"crop: x and y must be >= 0, or -1 (centred); got ({x}, {y})")
    return Geometry("crop", w, h, x=x, y=y)


_SIDE = "0 the input's, -1 by the aspect ratio, -2 the same, even"
GEOMETRY_FILTERS = (
    ("scale", "resize to w x h: separable polyphase resampling, antialiased when shrinking",
     scale_geometry, {"w": (int, KEEP, f"width; {_SIDE}"), "h": (int, KEEP, f"height; {_SIDE}"),
                      "kernel": (str, KERNELS[0], "|".join(KERNELS))}),
    ("crop", "cut out a w x h window at x, y", crop_geometry,
     {"x": (int, CENTRED, "left column; -1 centres the window"),
      "y": (int, CENTRED, "top row; -1 centres the window"),
      "w": (int, 0, "width; 0 to the frame's right edge"),
      "h": (int, 0, "height; 0 to the frame's bottom edge")}),
)
"""The geometry filters as the registry lists them (:data:`streamconv.chain.filters.REGISTRY`):
name,
summary, the function making the :class:`Geometry` from the parameters, and each parameter's
(type, default, help)."""


def chain_shapes(stages, shape: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """The (H, W, C) frame entering each stage of ``stages`` (FilterStage objects), then the
    chain's output: ``len(stages) + 1`` shapes, the first ``shape``.

    Raises:
        FrameFormatError: as :meth:`Geometry.output_shape`.
    """
    shapes = [tuple(shape)]
    for stage in stages:
        geometry = getattr(stage, "geometry", None)
        shapes.append(geometry.output_shape(shapes[-1]) if geometry is not None else shapes[-1])
    return shapes


def pixel_stretch(stages, shape: tuple[int, int, int]) -> Fraction:
    """How much wider, for its height, a pixel of the chain's output is than one of its input
    frames of (H, W, C) ``shape``: each scale stage from W x H to w x h multiplies it by
    (W / w) / (H / h); crop cuts out pixels as they are. A sink multiplies the input's pixel
    aspect ratio by it, so players show the picture as wide as the input's (FFmpeg's scale
    sets its output's alike).

    Raises:
        FrameFormatError: as :meth:`Geometry.output_shape`.
    """
    shapes, stretch = chain_shapes(stages, shape), Fraction(1)
    for stage, before, after in zip(stages, shapes, shapes[1:]):
        geometry = getattr(stage, "geometry", None)
        if geometry is not None and geometry.kind == "scale":
            stretch *= Fraction(before[1] * after[0], before[0] * after[1])
    return stretch


@dataclass(frozen=True)
class AxisTaps:
    """Resampling taps along one axis: output ``o`` is the sum over ``t`` of
    ``weights[o, t] * source[clamp(start[o] + t)]``.

    Attributes:
        start: (n_out,) int32 host array, the first source index of each output (may be < 0).
        weights: (n_out, taps) float32 host array, read-only; zeros outside an output's window.
    """

    start: np.ndarray
    weights: np.ndarray

    @property
    def taps(self) -> int:
        """Taps per output (the widest window)."""
        return int(self.weights.shape[1])


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _bicubic(x: np.ndarray) -> np.ndarray:
    a, x = -0.5, np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _bilinear(x: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(x))


_FUNCTIONS = {"lanczos3": (3, _lanczos3), "bicubic": (2, _bicubic), "bilinear": (1, _bilinear)}


@functools.lru_cache(maxsize=64)
def axis_taps(kernel: str, n_in: int, n_out: int) -> AxisTaps:
    """The taps of ``kernel`` from ``n_in`` to ``n_out`` pixels along an axis (see the module's
    definition), trimmed of zero weights (:func:`_trimmed`); starts never decrease."""
    outputs = np.arange(n_out, dtype=np.int64)
    if kernel == "area":
        first = outputs * n_in // n_out  # the footprint [o, o + 1) * n_in / n_out, exactly
        last = -(-(outputs + 1) * n_in // n_out)  # exclusive
        index = first[:, None] + np.arange(int((last - first).max()))
        low, high = (outputs * n_in / n_out)[:, None], ((outputs + 1) * n_in / n_out)[:, None]
        weights = np.clip(np.minimum(index + 1, high) - np.maximum(index, low), 0.0, None)
    else:
        radius, function = _FUNCTIONS[kernel]
        stretch = max(n_in / n_out, 1.0)
        centres = (2 * outputs + 1) * n_in / (2 * n_out)
        first = np.floor(centres - radius * stretch - 0.5).astype(np.int64) + 1
        count = math.ceil(2 * radius * stretch) + 1
        index = first[:, None] + np.arange(count)
        weights = function((index + 0.5 - centres[:, None]) / stretch)
        weights[np.abs(weights) < 1e-12] = 0.0  # sinc's zeros, which come out as 1e-17
    return _trimmed(first, weights / weights.sum(axis=1, keepdims=True))


def _trimmed(first: np.ndarray, weights: np.ndarray) -> AxisTaps:
    """The taps with each row's leading and trailing zero weights cut off (float64 in, float32
    out), then rows whose start would come before an earlier row's moved back to it behind
    leading zeros (sinc's zeros can trim one row more than the next): starts never decrease,
    which the GPU's tiles take for granted. Rows are padded with zeros to the widest."""
    weights32 = weights.astype(np.float32)
    nonzero = weights32 != 0
    lead = nonzero.argmax(axis=1)
    last = weights.shape[1] - nonzero[:, ::-1].argmax(axis=1)  # exclusive
    start = first + lead
    monotone = np.minimum.accumulate(start[::-1])[::-1]
    lead -= start - monotone
    columns = lead[:, None] + np.arange(int((last - lead).max()))
    inside = (columns >= 0) & (columns < weights.shape[1])
    clipped = np.clip(columns, 0, weights.shape[1] - 1)
    taps = np.where(inside, np.take_along_axis(weights32, clipped, 1), 0)
    taps = np.ascontiguousarray(taps, np.float32)
    taps.setflags(write=False)
    start = monotone.astype(np.int32)
    start.setflags(write=False)
    return AxisTaps(start, taps)
