"""The CPU reference backend: NumPy/OpenCV, float32 accumulation, the test oracle for every other
backend.

Semantics (DESIGN.md): correlation with the same taps on every channel, the border as
:func:`streamconv.frames.borders.pad_frame` pads it, float32 accumulation, round half to even,
saturation to 0..255 (uint8 frames) or 0..65535 (uint16 frames). A bank (``edge``) is
sqrt(gx^2 + gy^2).

The output is defined by the straightforward computation: pad the frame to float32,
``cv2.filter2D`` it (area <= 49) or add up ``cv2.filter2D`` of its 1 x K rows in row order
(larger kernels: filter2D turns to an inexact DFT from area 50 on some builds), then
``np.rint`` and ``np.clip``. Each faster path below gives the same bytes, for one of
two reasons:

- It runs the same float32 operations on the same values. OpenCV's float32 filter
  rounds alike wherever the same padded row width is filtered: its SIMD part uses FMA
  and the scalar end of each row does not, so the width is kept, but the rows are
  independent, and a band of rows gives what the whole frame gives on those rows.
- Its arithmetic cannot round (exact taps, see :mod:`.plan`), so neither the order
  of the additions nor FMA can change a sum (so exact rank-1 taps of area > 49 run as a
  row and a column pass).

Where each stage runs is decided once (:mod:`.plan`). One path is not the reference:
``kernel="separable"`` (:class:`CpuBackend`), rank-1 taps as two 1-D passes whatever their
precision, within 1 of the reference.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Sequence

import cv2
import numpy as np

from ...frames.borders import CV_BORDERS, DEFAULT_BORDER, check_border
from ...chain.filters import COMBINE_MAGNITUDE, FilterStage
from ...nn.layer import check_sample_type
from ...frames.checks import as_hwc, check_same_frame
from ...nn.layer import layer_cpu
from ...chain.resample import chain_shapes
from ...frames.slots import Slot, output_planes
from .ops import (CV_DEPTHS, Scratch, copy_result, filter_into, opencv_view, run_bands,
                  sample_rows)
from .plan import (AUTO, BAND_ROWS, CPU_SEPARABLE, DIRECT_MAX_AREA, StagePlan,
                   first_equal_rows, magnitude_reference, make_plan, round_reference,
                   separable_factors)
from .resample import geometry_into
from ..families.rank1 import SeparableTaps
from ..protocol import Backend
from ...frames.yuv import YuvLayout, planes_to_rgb, rgb_to_planes

def correlate(padded: np.ndarray, taps: np.ndarray, height: int, width: int, *,
              first_rows: Sequence[int] | None = None, scratch: Scratch | None = None,
              name: str = "sum", factors: SeparableTaps | None = None) -> np.ndarray:
    """Valid-mode correlation of a padded frame with one tap matrix, in float32.

    Args:
        padded: (H + 2R, W + 2R, C) float32 host array.
        taps: (K, K) float32 host array, K = 2R + 1.
        height, width: H and W of the result.
        first_rows: ``first_equal_rows(taps)`` (kernels of area > 49), computed if not given.
        scratch, name: where the result and work buffers live (new arrays if no scratch).
        factors: the taps' row and column factors: a row pass, then a column pass.

    Returns:
        (H, W, C) float32 host array of unrounded sums, a view into ``scratch``.
    """
    scratch = scratch or Scratch()
    size = taps.shape[0]
    radius = size // 2
    if size == 1:
        return np.multiply(padded, np.float32(taps[0, 0]), out=scratch.get(name, padded.shape))
    if factors is not None or size * size <= DIRECT_MAX_AREA:
        full = scratch.get(name, padded.shape)
        filter_into(full, padded, taps, factors=factors)
        return full[radius:radius + height, radius:radius + width]
    # The reference adds the 1 x K row correlations in row order (those float32 additions are
    # part of its rounding) and so does this; rows that share a pass (``first_equal_rows``)
    # are filtered once over the padded rows they all read, and sliced for each.
    first_rows = first_rows or first_equal_rows(taps)
    if not any(first_rows):
        return _sum_equal_rows(padded, taps, height, width, scratch, name)
    last_use = {first: row for row, first in enumerate(first_rows)}
    result = scratch.get(name, (height, width, padded.shape[2]))
    # first row -> its taps over padded rows first..last_use + H
    filtered: dict[int, np.ndarray] = {}
    for row, first in enumerate(first_rows):
        if first == row:
            shared = last_use[row] > row
            filtered[row] = scratch.get(f"{name}.row{row}" if shared else f"{name}.row",
                                        (last_use[row] - row + height,) + padded.shape[1:])
            filter_into(filtered[row], padded[row:last_use[row] + height], taps[row:row + 1])
        line = filtered[first][row - first:row - first + height, radius:radius + width]
        if row == 0:
            np.copyto(result, line)
        else:
            np.add(result, line, out=result)
    return result


def _sum_equal_rows(padded: np.ndarray, taps: np.ndarray, height: int, width: int,
                    scratch: Scratch, name: str) -> np.ndarray:
    """:func:`correlate` for taps whose rows are all equal (a box): one row pass, and the row
    sums as a K x 1 correlation with ones. OpenCV's float32 filter adds up x * 1 + s, which
    rounds as x + s does, in row order: the reference's additions, in one call."""
    size = taps.shape[0]
    radius = size // 2
    rows = scratch.get(f"{name}.row", (size - 1 + height,) + padded.shape[1:])
    filter_into(rows, padded[:size - 1 + height], taps[:1])
    full = scratch.get(name, rows.shape)
    filter_into(full, rows, np.ones((size, 1), np.float32))
    return full[radius:radius + height, radius:radius + width]


def _float_band(dst: np.ndarray, padded: np.ndarray, stage: FilterStage, plan: StagePlan,
                start: int, stop: int, scratch: Scratch) -> None:
    """Rows start..stop of one stage the reference's way: float32 sums of the padded frame,
    rounded."""
    radius = stage.radius
    height = stop - start
    width = dst.shape[1]
    band = scratch.get("band", (height + 2 * radius,) + padded.shape[1:])
    np.copyto(band, padded[start:stop + 2 * radius])  # uint8 or uint16 -> float32, exact
    sums = [correlate(band, taps, height, width, scratch=scratch, name=f"sum{i}",
                      first_rows=plan.first_rows[i] if plan.first_rows else None,
                      factors=plan.separable[i] if plan.separable else None)
            for i, taps in enumerate(stage.taps)]
    # Not cv2.magnitude: its square root is not correctly rounded (sqrt(49) = 7.0000005).
    acc = magnitude_reference(*sums) if stage.combine == COMBINE_MAGNITUDE else sums[0]
    out = dst[start:stop]
    out_samples, acc_samples = sample_rows(out, acc)
    if plan.cv_round and out.dtype == np.uint8:
        # saturate_cast<uchar>(|x|) of x >= 0: cvRound (half to even), then clamped, as
        # cv2.add(x, 0.0, dtype=CV_8U) does; that one can leave OpenCV's worker threads
        # spinning after each call (on an idle machine). THRESH_TOZERO is max(x, 0), three
        # times as fast as np.maximum on float32.
        copy_result(acc_samples, cv2.threshold(acc_samples, 0, 0, cv2.THRESH_TOZERO,
                                               dst=acc_samples)[1])
        copy_result(out_samples, cv2.convertScaleAbs(acc_samples, dst=out_samples))
    # cv2.add takes a 1 x 1 array (a 1-pixel frame, a 1-wide row) for a Scalar: NumPy rounds it.
    elif plan.cv_round and acc_samples.shape != (1, 1):
        # saturate_cast<ushort>(x + 0.0), likewise
        depth = CV_DEPTHS[out.dtype]
        copy_result(out_samples, cv2.add(acc_samples, 0.0, dst=out_samples, dtype=depth))
    else:
        round_reference(out, acc)


def apply_filter_into(dst: np.ndarray, src: np.ndarray, stage: FilterStage, border: str,
                      plan: StagePlan | None = None, scratch: Scratch | None = None,
                      parallel: bool = True) -> None:
    """Run one filter stage on the CPU: dst = round(correlate(src)), saturated to src's dtype.

    Args:
        dst: (H, W, C) uint8 or uint16 host array, written.
        src: (H, W, C) host array of dst's dtype, read; may not alias dst.
        stage: the filter (single taps or a magnitude bank).
        border: one of streamconv.frames.borders.BORDER_MODES.
        plan: ``make_plan(stage, src.dtype)``, made here if not given.
        scratch: buffers kept between calls, made here if not given.
        parallel: run the bands of rows on the pool (else in this thread).
    """
    plan = plan or make_plan(stage, src.dtype)
    scratch = scratch or Scratch()
    if plan.identity:
        np.copyto(dst, src)
    elif plan.table is not None and plan.dtype == np.uint8:
        dst_samples, src_samples = sample_rows(dst, src)
        copy_result(dst_samples, cv2.LUT(src_samples, plan.table, dst=dst_samples))
    elif plan.table is not None:
        np.take(plan.table, src, out=dst)  # cv2.LUT takes 8-bit input only
    elif plan.direct:
        filter_into(dst, src, stage.taps[0], CV_BORDERS[border])
    else:
        # Pad once in uint8 (as pad_frame does, into a buffer kept for the next frame: a new
        # one costs its page faults every frame); bands of rows then run on the pool, each
        # converting its own rows to float32 and finishing them while they are in cache.
        radius = stage.radius
        height, width, channels = src.shape
        shape = (height + 2 * radius, width + 2 * radius, channels)
        padded = scratch.get("padded", shape, src.dtype)
        target = opencv_view(padded)
        copy_result(target, cv2.copyMakeBorder(opencv_view(src), radius, radius, radius, radius,
                                               CV_BORDERS[border], dst=target, value=0))

        def band(start: int) -> None:
            stop = min(start + plan.band_rows, height)
            _float_band(dst, padded, stage, plan, start, stop, scratch)

        run_bands(band, range(0, height, plan.band_rows), parallel)


def convert_colour(rgb: np.ndarray, planes: np.ndarray, layout: YuvLayout, *, to_rgb: bool,
                   parallel: bool = True) -> None:
    """4:2:0 planes -> RGB (``to_rgb``) or back, in bands of rows, converted in parallel (NumPy
    releases the GIL) or in this thread: ``rgb`` (H, W, 3) of ``layout.frame_dtype`` and
    ``planes`` (1.5 W H,) of ``layout.dtype``, host."""
    luma, u_plane, v_plane = layout.planes(planes)
    coefficients = layout.coefficients

    def band(start: int) -> None:
        rows, half = slice(start, start + BAND_ROWS), slice(start // 2, (start + BAND_ROWS) // 2)
        if to_rgb:
            planes_to_rgb(rgb[rows], luma[rows], u_plane[half], v_plane[half], coefficients)
        else:
            rgb_to_planes(luma[rows], u_plane[half], v_plane[half], rgb[rows], coefficients)

    run_bands(band, range(0, layout.height, BAND_ROWS), parallel)


class CpuBackend(Backend):
    """Runs a filter chain on host frames with NumPy and OpenCV.

    Args:
        filters: the stages, applied in order; each rounds to the frame's sample type (uint8
            or uint16).
        border: border mode for every stage.
        kernel: ``auto`` (the reference) or ``separable``: rank-1 taps as a row pass and a
            column pass (``cv2.sepFilter2D`` in float32), 2K multiply-adds per sample instead of
            K^2. Its sums differ from the reference's by float32 rounding only, so its samples
            by at most 1 (as the cuda backend's kernels may), and not at all where the taps'
            factors are exact (multiples of 1/256 within the exactness bound). Any other name
            is a cuda kernel and runs as ``auto``.

    Raises:
        FilterSpecError: ``separable`` with a bank or taps that are not rank 1.
    """

    name = "cpu"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                 kernel: str = AUTO) -> None:
        self.filters = list(filters)
        self.border = check_border(border)
        self.kernel = kernel if kernel == CPU_SEPARABLE else AUTO
        for stage in self.filters:  # refuse taps the kernel cannot run before any frame
            # (stages across frames, which run on TemporalCpuBackend, whatever the kernel)
            if stage.layer is None and stage.geometry is None and stage.temporal is None:
                separable_factors(stage, self.kernel, np.dtype(np.uint8))
        # per sample type, made at first use
        self._plans: dict[np.dtype, list[StagePlan | None]] = {}
        self._scratch = [Scratch() for _ in self.filters]  # per stage: band buffers differ in shape
        self._frames = Scratch()  # the intermediate frames of a chain

    def describe(self) -> str:
        """One line naming the backend, for logs."""
        if self.kernel == AUTO:
            return "cpu (NumPy + OpenCV reference)"
        return f"cpu (NumPy + OpenCV, {self.kernel} kernels)"

    def _plans_for(self, dtype: np.dtype) -> list[StagePlan | None]:
        """The stages' plans for frames of ``dtype`` (made once per dtype).

        Raises:
            FrameTypeError: a 16-bit frame for a chain with a convolution layer (8-bit only).
        """
        plans = self._plans.get(dtype)
        if plans is None:
            check_sample_type(self.filters, dtype)
            plans = self._plans[dtype] = [
                None if stage.layer or stage.geometry else make_plan(stage, dtype, self.kernel)
                for stage in self.filters]
        return plans

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (h, w, C) the chain makes of (H, W, C) frames (a geometry stage changes it);
        FrameFormatError where a stage cannot take that size (a crop beyond the frame)."""
        return chain_shapes(self.filters, shape)[-1]

    def apply_into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Filter ``src`` into ``dst``: (H, W, C) or (H, W) host arrays of one dtype, uint8 or
        uint16, ``dst`` of :meth:`output_shape` (``src``'s unless a stage changes the size);
        bands of rows run on a pool of OpenCV's thread count."""
        self._apply_into(dst, src, parallel=True)

    def _apply_into(self, dst: np.ndarray, src: np.ndarray, *, parallel: bool) -> None:
        """:meth:`apply_into`, its bands in parallel or in this thread."""
        src3, dst3 = as_hwc(src, what="input frame"), as_hwc(dst, what="output frame")
        shapes = chain_shapes(self.filters, src3.shape)
        check_same_frame(dst3, src3, shapes[-1])
        if not self.filters:
            np.copyto(dst3, src3)
            return
        current = src3
        last = len(self.filters) - 1
        plans = self._plans_for(src3.dtype)
        bands = partial(run_bands, parallel=parallel)
        for number, (stage, plan, scratch) in enumerate(zip(self.filters, plans, self._scratch)):
            # Intermediate frames are kept for the next frame, one per stage (sizes may differ).
            target = (dst3 if number == last
                      else self._frames.get(f"frame{number}", shapes[number + 1], src3.dtype))
            if stage.layer is not None:
                np.copyto(target, layer_cpu(current, stage.layer))
            elif stage.geometry is not None:
                geometry_into(target, current, stage.geometry, bands)
            else:
                apply_filter_into(target, current, stage, self.border, plan, scratch, parallel)
            current = target

    def host_frames(self) -> int:
        """A padded copy of the frame and the two frames kept between a chain's stages."""
        return min(len(self.filters), 1) + min(max(len(self.filters) - 1, 0), 2)

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None, dtype=np.uint8) -> list[Slot]:
        """Make ``count`` slots with host buffers of ``dtype`` (uint8 or uint16), ``host_in``
        (H, W, C) and ``host_out`` of :meth:`output_shape`; or with the flat 4:2:0 buffers of
        ``planes`` (of ``planes.dtype``; each frame is converted to RGB of ``planes.frame_dtype``,
        filtered and converted back at the output's size: FrameFormatError if that is odd)."""
        # refuse early
        self._plans_for(np.dtype(planes.frame_dtype if planes is not None else dtype))
        out_shape = self.output_shape(tuple(planes.frame_shape if planes is not None else shape))
        out_planes = output_planes(planes, out_shape)
        shapes = (planes.shape, out_planes.shape) if planes is not None else (shape, out_shape)
        dtype = planes.dtype if planes is not None else dtype
        return [Slot(index=i, host_in=np.empty(shapes[0], dtype),
                     host_out=np.empty(shapes[1], dtype), planes=planes, out_planes=out_planes)
                for i in range(count)]

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Nothing to free early: host arrays go with their last reference."""

    def submit(self, slot: Slot) -> None:
        """Process the slot now (the CPU has no queue); records the 'kernel' time.

        All in this thread: a ring already overlaps decoding, this and encoding. On two cores,
        1080p to libx264 ultrafast, bands on the pool as well cost more CPU for about the same
        frame rate: box 5x5 63 against 56 ms a frame (26 and 29 fps), Gaussian 13x13 124
        against 107 ms (14.1 and 12.6 fps).
        """
        begin = time.perf_counter()
        if slot.planes is None:
            self._apply_into(slot.host_out, slot.host_in, parallel=False)
        elif not self.filters:
            np.copyto(slot.host_out, slot.host_in)  # nothing to filter: the planes pass unchanged
        else:
            rgb_in = self._frames.get("rgb_in", slot.frame_shape, slot.frame_dtype)
            rgb_out = self._frames.get("rgb_out", slot.out_shape, slot.frame_dtype)
            convert_colour(rgb_in, slot.host_in, slot.planes, to_rgb=True, parallel=False)
            self._apply_into(rgb_out, rgb_in, parallel=False)
            convert_colour(rgb_out, slot.host_out, slot.out_planes or slot.planes, to_rgb=False,
                           parallel=False)
        slot.times["kernel"] = time.perf_counter() - begin

    def is_done(self, slot: Slot) -> bool:
        """Always True: submit() finished the work."""
        return True

    def wait(self, slot: Slot) -> None:
        """Nothing to wait for on the CPU."""

    def close(self) -> None:
        """Nothing to release."""
