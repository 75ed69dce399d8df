"""ArraySource: frames from NumPy arrays already in host memory (tests, the library API)."""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable

import numpy as np

from ...errors import FrameFormatError, FrameTypeError
from ...frames.checks import as_hwc
from ...frames.slots import FrameMeta
from .source import Source


class ArraySource(Source):
    """Frames from NumPy arrays already in host memory (tests, the library API).

    Args:
        frames: an iterable of (H, W, C) or (H, W) uint8 or uint16 arrays, all of one shape
            and dtype (the first frame's; uint8 when ``shape`` is given).
        fps: nominal frame rate; pts = frame number, time base 1/fps.
        shape: (H, W, C) if ``frames`` is a lazy iterable; otherwise taken from the first frame.

    Examples:
        >>> import numpy as np
        >>> source = ArraySource([np.zeros((4, 6, 3), np.uint8)] * 2, fps=50)
        >>> source.shape, source.frame_count, float(source.time_base)
        ((4, 6, 3), 2, 0.02)
    """

    name = "arrays"

    def __init__(self, frames: Iterable[np.ndarray], *, fps: float | Fraction = 30,
                 shape: tuple[int, int, int] | None = None) -> None:
        self._iter = iter(frames)
        self._first: np.ndarray | None = None
        if shape is None:
            first = next(self._iter, None)
            if first is None:
                raise FrameFormatError("ArraySource: no frames given")
            self._first = as_hwc(first)
            shape = self._first.shape
            self.dtype = self._first.dtype
        self.height, self.width, self.channels = shape
        self.frame_rate = Fraction(fps).limit_denominator(1001)
        self.time_base = 1 / self.frame_rate
        if isinstance(frames, (list, tuple)):
            self.frame_count = len(frames)
        self._index = 0

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        frame = self._first if self._first is not None else next(self._iter, None)
        self._first = None
        if frame is None:
            return None
        frame = as_hwc(frame)
        if frame.shape != buffer.shape:
            raise FrameFormatError(f"unexpected frame shape: {frame.shape} != {buffer.shape}")
        if frame.dtype != buffer.dtype:
            raise FrameTypeError(f"unexpected frame dtype: {frame.dtype} != {buffer.dtype}")
        np.copyto(buffer, frame)
        index = self._index
        self._index += 1
        return FrameMeta(index, index, self.time_base)
