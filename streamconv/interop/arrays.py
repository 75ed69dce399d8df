"""A caller's frame read as what it is: a host NumPy array, or a :class:`DeviceView` of GPU memory.

Device arrays are read through ``__cuda_array_interface__`` (CuPy, PyTorch, PyCUDA, Numba,
PyNvVideoCodec) or DLPack (``__dlpack__``); host tensors that speak DLPack or the NumPy array
interface (a PyTorch CPU tensor, pinned or not) become NumPy arrays without a copy. A device
frame's pixels and channels must be adjacent (no channel or column steps); its rows may have any
pitch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FrameDeviceError, FrameFormatError, FrameTypeError
from ..frames.checks import CHANNEL_COUNTS, FRAME_DTYPES, as_hwc
from ..gpu import dlpack
from .raw import (RawDeviceArray, offers_cuda_array_interface, raw_device_array,
                  torch_device_array)


@dataclass(slots=True)  # made per frame: plain slots, not frozen (whose __init__ is slower)
class DeviceView:
    """A frame in device memory, as the kernels address it.

    Attributes:
        address: the first sample's device address.
        shape: (H, W, C), C in 1, 3, 4. frame_shape: the caller's own shape ((H, W) for grey).
        dtype: uint8 or uint16. row_pitch: bytes from one row to the next (>= W C itemsize).
        device: the CUDA device ordinal its producer names (None: unknown until checked).
        stream: the stream its producer asks consumers to wait on (``__cuda_array_interface__``
            v3), or None. readonly: the producer marked it read-only.
        owner: what keeps the memory alive while the view is used (the array, or its DLPack tensor).
    """

    address: int
    shape: tuple[int, int, int]
    frame_shape: tuple[int, ...]
    dtype: np.dtype
    row_pitch: int
    device: int | None
    stream: int | None
    readonly: bool
    owner: Any

    @property
    def nbytes_span(self) -> int:
        """Bytes from the first sample to just past the last one."""
        height, width, channels = self.shape
        return (height - 1) * self.row_pitch + width * channels * self.dtype.itemsize

    def overlaps(self, other: "DeviceView") -> bool:
        """Whether the two frames share any byte of device memory."""
        return (self.address < other.address + other.nbytes_span
                and other.address < self.address + self.nbytes_span)


def as_frame(frame: Any, *, what: str = "frame") -> np.ndarray | DeviceView:
    """``frame`` as a host (H, W, C) NumPy view (see :func:`streamconv.frames.checks.as_hwc`) or a
    DeviceView.

    Raises:
        FrameTypeError: not an array of a known kind, or neither uint8 nor uint16.
        FrameFormatError: a shape other than (H, W), (H, W, 3), (H, W, 4), an empty frame, or a
            device frame whose pixels or channels are not adjacent.
        FrameDeviceError: a DLPack tensor in memory of another kind (neither host nor CUDA).
    """
    if isinstance(frame, np.ndarray):
        return as_hwc(frame, what=what)
    tensor = torch_device_array(frame)
    if tensor is not None:
        return _view(tensor, what)
    if offers_cuda_array_interface(frame):
        return _view(raw_device_array(frame), what)
    if callable(getattr(frame, "__dlpack_device__", None)):
        kind = frame.__dlpack_device__()[0]
        # Page-locked host memory (a pinned PyTorch CPU tensor) is host memory: a host frame.
        if kind in (dlpack.DEVICE_CPU, dlpack.DEVICE_CUDA_HOST):
            return as_hwc(np.from_dlpack(frame), what=what)
        if kind in (dlpack.DEVICE_CUDA, dlpack.DEVICE_CUDA_MANAGED):
            return _view(raw_device_array(frame), what)
        raise FrameDeviceError(f"{what}: DLPack device type {kind} (neither host nor CUDA memory); "
                               "pass a CUDA device array or a host array")
    if hasattr(frame, "__array_interface__") or hasattr(frame, "__array__"):
        return as_hwc(np.asarray(frame), what=what)
    return as_hwc(frame, what=what)  # raises its FrameTypeError


def _view(raw: RawDeviceArray, what: str) -> DeviceView:
    """Check a device frame's dtype, shape and steps and make its view."""
    shape, strides, dtype = raw.shape, raw.strides, raw.dtype
    if dtype not in FRAME_DTYPES:
        raise FrameTypeError(f"unexpected {what} dtype: {dtype} != uint8 or uint16")
    frame_shape = shape
    if len(shape) == 2:
        shape, strides = (*shape, 1), (*strides, dtype.itemsize)
    if len(shape) != 3 or shape[2] not in CHANNEL_COUNTS:
        raise FrameFormatError(f"unexpected {what} shape: {shape} != (H, W), (H, W, 3) or (H, W, "
                               "4)")
    height, width, channels = shape
    if height == 0 or width == 0:
        raise FrameFormatError(f"empty {what}: shape {shape}")
    row, column, channel = strides
    pixel_bytes = channels * dtype.itemsize
    if ((channels > 1 and channel != dtype.itemsize) or (width > 1 and column != pixel_bytes)
            or (height > 1 and row < width * pixel_bytes)):
        raise FrameFormatError(
            f"{what}: a device frame's channels and pixels must be adjacent and its rows apart by "
            "at least a "
            f"row's bytes (strides {strides} for shape {shape}); any row pitch is fine. Copy it "
            "first "
            "(e.g. .contiguous() or cupy.ascontiguousarray)")
    pitch = row if height > 1 else width * pixel_bytes
    stream = raw.stream if isinstance(raw.stream, int) else None
    return DeviceView(int(raw.address), (height, width, channels), frame_shape, dtype, pitch,
                      raw.device, stream, raw.readonly, raw.owner)
