"""Border modes: how a filter reads pixels outside the frame. The same on every backend.

- ``zero``: outside pixels are 0 (the textbook's ghost cells).
- ``replicate``: the nearest edge pixel (``aaa|abcd|ddd``).
- ``reflect101``: mirror without repeating the edge (``cb|abcd|cb``), OpenCV's default
  and ours, so that a blur does not darken the frame's edges. Reflection repeats for a
  halo wider than the frame; an axis of length 1 always maps to index 0.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..errors import SettingsError

BORDER_MODES = ("zero", "replicate", "reflect101")
DEFAULT_BORDER = "reflect101"
BORDER_CODES = {name: code for code, name in enumerate(BORDER_MODES)}
"""The integer each mode is compiled as in the CUDA kernels (BORDER macro)."""

CV_BORDERS = {"zero": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
              "reflect101": cv2.BORDER_REFLECT_101}
"""The OpenCV border type of each mode. OpenCV's borderInterpolate has our semantics, wide
halos and length-1 axes included (tests/backends/test_cpu_backend.py checks pad_frame against
border_index)."""

_CV_DTYPES = {np.dtype(t)
              for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64)}


def check_border(mode: str) -> str:
    """Return ``mode`` if it is a known border mode, else raise SettingsError naming the known
    ones."""
    # a list would fail the lookup as unhashable
    if not isinstance(mode, str) or mode not in BORDER_CODES:
        raise SettingsError(f"unknown border mode {mode!r}; known: {', '.join(BORDER_MODES)}")
    return mode


def border_index(index: np.ndarray, length: int, mode: str) -> np.ndarray:
    """Map indices along one axis (any ints, host) into 0..length-1, or -1 for a zero pixel.

    Args:
        index: integer array of positions, possibly outside [0, length).
        length: the axis length (>= 1).
        mode: one of BORDER_MODES.

    Returns:
        int64 array of the same shape.
    """
    index = np.asarray(index, dtype=np.int64)
    inside = (index >= 0) & (index < length)
    if mode == "zero":
        return np.where(inside, index, -1)
    if mode == "replicate":
        return np.clip(index, 0, length - 1)
    if length == 1:
        return np.zeros_like(index)
    period = 2 * length - 2
    folded = np.mod(index, period)
    return np.where(folded >= length, period - folded, folded)


def pad_frame(frame: np.ndarray, radius: int, mode: str, dtype=np.float32) -> np.ndarray:
    """Pad an (H, W, C) host frame by ``radius`` on every side under ``mode``.

    Returns:
        (H + 2R, W + 2R, C) array of ``dtype``; zero pixels for mode ``zero``.
    """
    height, width = frame.shape[:2]
    shape = (height + 2 * radius, width + 2 * radius) + frame.shape[2:]
    if frame.dtype in _CV_DTYPES and frame.shape[2:] in ((), (1,), (3,), (4,)):
        # One pass in the frame's own dtype (uint8: a quarter of the float32 traffic), then
        # one converting copy; NumPy fancy indexing was several times slower.
        padded = cv2.copyMakeBorder(frame, radius, radius, radius, radius, CV_BORDERS[mode],
                                    value=0)
        padded = padded.reshape(shape)  # OpenCV drops a channel axis of length 1
    else:
        rows = border_index(np.arange(-radius, height + radius), height, mode)
        cols = border_index(np.arange(-radius, width + radius), width, mode)
        padded = frame[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))]
        if mode == "zero":
            padded[rows < 0] = 0
            padded[:, cols < 0] = 0
    return padded.astype(dtype, copy=False)
