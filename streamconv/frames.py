"""Frame checks shared by sources, sinks and backends."""

from __future__ import annotations

import numpy as np

from .errors import FrameFormatError, FrameTypeError, InputError

CHANNEL_COUNTS = (1, 3, 4)

FRAME_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
"""Sample types a frame may have: 8 bits (saturating at 255) or 16 bits (saturating at 65535)."""


def sample_maximum(dtype: np.dtype) -> int:
    """The largest sample of a frame dtype: 255 for uint8, 65535 for uint16."""
    return int(np.iinfo(dtype).max)


def as_hwc(frame: object, *, what: str = "frame") -> np.ndarray:
    """View an (H, W) or (H, W, C) uint8 or uint16 host array as (H, W, C) with C in 1, 3, 4
    (no copy).

    Raises:
        FrameTypeError: not a NumPy array, or neither uint8 nor uint16.
        FrameFormatError: wrong number of dimensions, channels, or an empty frame.
    """
    if not isinstance(frame, np.ndarray):
        raise FrameTypeError(f"{what}: expected a numpy.ndarray, got {type(frame).__name__}")
    if frame.dtype not in FRAME_DTYPES:
        raise FrameTypeError(f"unexpected {what} dtype: {frame.dtype} != uint8 or uint16")
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3 or frame.shape[2] not in CHANNEL_COUNTS:
        raise FrameFormatError(
            f"unexpected {what} shape: {frame.shape} != (H, W), (H, W, 3) or (H, W, 4)"
        )
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise FrameFormatError(f"empty {what}: shape {frame.shape}")
    return frame


def check_same_frame(dst: np.ndarray, src: np.ndarray) -> None:
    """Raise FrameFormatError unless dst and src have the same shape, FrameTypeError unless the
    same dtype (a filter keeps the sample type)."""
    if dst.shape != src.shape:
        raise FrameFormatError(f"unexpected output shape: {dst.shape} != {src.shape}")
    if dst.dtype != src.dtype:
        raise FrameTypeError(f"unexpected output dtype: {dst.dtype} != {src.dtype}")


DEFAULT_MAX_PIXELS = 7680 * 4320
"""Largest frame (width x height) a run accepts unless told otherwise: 8K UHD."""


def check_frame_size(width: int, height: int, max_pixels: int | None, what: str) -> None:
    """Refuse a frame size over ``max_pixels`` (None: no limit), before any buffer is allocated.

    Raises:
        InputError: the frame is larger; the message gives both sizes and the memory it would take.
    """
    if max_pixels is not None and width * height > max_pixels:
        raise InputError(
            f"{what} has {width}x{height} frames ({width * height / 1e6:.1f} Mpixel, "
            f"{3 * width * height / 2**20:.0f} MiB per RGB frame), over the limit of "
            f"{max_pixels} pixels (--max-pixels)")
