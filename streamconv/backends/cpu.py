"""The CPU reference backend: NumPy/OpenCV, float32 accumulation, the test oracle for every other backend.

Semantics (DESIGN.md): correlation with the same taps on every channel, the border
padded explicitly by :func:`streamconv.borders.pad_frame`, float32 accumulation,
round half to even, saturation to 0..255. A bank (``edge``) is sqrt(gx^2 + gy^2).
"""

from __future__ import annotations

import time
from typing import Sequence

import cv2
import numpy as np

from ..borders import DEFAULT_BORDER, check_border, pad_frame
from ..filters import COMBINE_MAGNITUDE, FilterStage
from ..frames import as_hwc, check_same_shape
from ..slots import Slot

# cv2.filter2D switches to a DFT (inexact) once the kernel area reaches 50 on some builds;
# larger kernels are summed from 1 x K rows, each well under that.
_DIRECT_MAX_AREA = 49


def correlate(padded: np.ndarray, taps: np.ndarray, height: int, width: int) -> np.ndarray:
    """Valid-mode correlation of a padded frame with one tap matrix, in float32.

    Args:
        padded: (H + 2R, W + 2R, C) float32 host array.
        taps: (K, K) float32 host array, K = 2R + 1.
        height, width: H and W of the result.

    Returns:
        (H, W, C) float32 host array of unrounded sums.
    """
    size = taps.shape[0]
    radius = size // 2
    channels = padded.shape[2]
    image = padded[:, :, 0] if channels == 1 else padded
    if size == 1:
        result = image[:height, :width] * np.float32(taps[0, 0])
    elif size * size <= _DIRECT_MAX_AREA:
        full = cv2.filter2D(image, cv2.CV_32F, taps, borderType=cv2.BORDER_CONSTANT)
        result = full[radius:radius + height, radius:radius + width]
    else:
        result = np.zeros((height, width) + image.shape[2:], dtype=np.float32)
        for row in range(size):
            band = image[row:row + height]
            line = cv2.filter2D(band, cv2.CV_32F, taps[row:row + 1], borderType=cv2.BORDER_CONSTANT)
            result += line[:, radius:radius + width]
    return result.reshape(height, width, channels)


def apply_filter_into(dst: np.ndarray, src: np.ndarray, stage: FilterStage, border: str) -> None:
    """Run one filter stage on the CPU: dst = round(correlate(src)), saturated to uint8.

    Args:
        dst: (H, W, C) uint8 host array, written.
        src: (H, W, C) uint8 host array, read; may not alias dst.
        stage: the filter (single taps or a magnitude bank).
        border: one of streamconv.borders.BORDER_MODES.
    """
    height, width = src.shape[:2]
    padded = pad_frame(src, stage.radius, border)
    sums = [correlate(padded, taps, height, width) for taps in stage.taps]
    if stage.combine == COMBINE_MAGNITUDE:
        gx, gy = sums
        acc = np.sqrt(gx * gx + gy * gy)
    else:
        (acc,) = sums
    np.rint(acc, out=acc)
    np.clip(acc, 0, 255, out=acc)
    np.copyto(dst, acc, casting="unsafe")


class CpuBackend:
    """Runs a filter chain on host frames with NumPy and OpenCV.

    Args:
        filters: the stages, applied in order; each rounds to uint8.
        border: border mode for every stage.
    """

    name = "cpu"

    def __init__(self, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER) -> None:
        self.filters = list(filters)
        self.border = check_border(border)

    def describe(self) -> str:
        """One line naming the backend, for logs."""
        return "cpu (NumPy + OpenCV reference)"

    def apply_into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Filter ``src`` into ``dst``: both (H, W, C) or (H, W) uint8 host arrays of one shape."""
        src3, dst3 = as_hwc(src, what="input frame"), as_hwc(dst, what="output frame")
        check_same_shape(dst3, src3)
        if not self.filters:
            np.copyto(dst3, src3)
            return
        current = src3
        for number, stage in enumerate(self.filters):
            target = dst3 if number == len(self.filters) - 1 else np.empty_like(src3)
            apply_filter_into(target, current, stage, self.border)
            current = target

    def apply(self, src: np.ndarray) -> np.ndarray:
        """Filter ``src`` into a new array of the same shape (host, uint8)."""
        dst = np.empty_like(src)
        self.apply_into(dst, src)
        return dst

    # The slot protocol the pipeline drives; the CUDA backend implements the same methods.

    def allocate_slots(self, shape: tuple[int, int, int], count: int) -> list[Slot]:
        """Make ``count`` slots with (H, W, C) uint8 host buffers."""
        return [
            Slot(index=i, host_in=np.empty(shape, np.uint8), host_out=np.empty(shape, np.uint8))
            for i in range(count)
        ]

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Nothing to free early: host arrays go with their last reference."""

    def submit(self, slot: Slot) -> None:
        """Process the slot now (the CPU has no queue); records the 'kernel' time."""
        begin = time.perf_counter()
        self.apply_into(slot.host_out, slot.host_in)
        slot.times["kernel"] = time.perf_counter() - begin

    def is_done(self, slot: Slot) -> bool:
        """Always True: submit() finished the work."""
        return True

    def wait(self, slot: Slot) -> None:
        """Nothing to wait for on the CPU."""

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> "CpuBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
