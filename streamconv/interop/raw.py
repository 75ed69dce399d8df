"""Any CUDA device array as its producer describes it (``__cuda_array_interface__`` or DLPack):
what :mod:`.arrays` checks as a frame and :mod:`streamconv.nn` reads as a tensor."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FrameTypeError
from ..gpu import dlpack
from ..gpu.dlpack import contiguous_strides


def offers_cuda_array_interface(frame: Any) -> bool:
    """Whether ``frame`` has ``__cuda_array_interface__``. A PyTorch CUDA tensor that requires
    grad has it but raises RuntimeError when it is read: True, and raw_device_array says why."""
    try:
        return hasattr(frame, "__cuda_array_interface__")
    except RuntimeError:
        return True


def is_device_array(frame: Any) -> bool:
    """Whether ``frame`` is an array in CUDA device memory (by its interfaces; nothing checked)."""
    if isinstance(frame, np.ndarray):
        return False
    if offers_cuda_array_interface(frame):
        return True
    device = getattr(frame, "__dlpack_device__", None)
    return callable(device) and device()[0] in (dlpack.DEVICE_CUDA, dlpack.DEVICE_CUDA_MANAGED)


@dataclass(slots=True)  # made per frame: plain slots, not frozen (whose __init__ is slower)
class RawDeviceArray:
    """Any device array as its producer describes it: address, shape, strides in bytes, dtype,
    device ordinal (None: unknown), the stream to wait on (or None), read-only, and its owner."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    device: int | None
    stream: Any
    readonly: bool
    owner: Any

    @property
    def c_contiguous(self) -> bool:
        step = self.dtype.itemsize
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size > 1 and stride != step:
                return False
            step *= size
        return True


@functools.lru_cache(maxsize=64)
def _dtype(typestr: str) -> np.dtype:
    return np.dtype(typestr)


def raw_device_array(array: Any) -> RawDeviceArray:
    """Read a device array's description from ``__cuda_array_interface__`` (versions 0 to 3) or
    DLPack (asked for on the legacy default stream, 1, so that the producer's pending work comes
    first).

    Raises:
        FrameTypeError: neither interface, or a DLPack tensor that is not in CUDA memory.
    """
    try:
        interface = getattr(array, "__cuda_array_interface__", None)
    except RuntimeError as error:  # a PyTorch tensor that requires grad refuses it
        raise FrameTypeError(f"{type(array).__name__} gives no __cuda_array_interface__: "
                             f"{error}") from None
    if interface is not None:
        dtype = _dtype(interface["typestr"])
        shape = tuple(interface["shape"])
        strides = interface.get("strides")
        strides = contiguous_strides(shape, dtype.itemsize) if strides is None else tuple(strides)
        address, readonly = interface["data"]
        return RawDeviceArray(address or 0, shape, strides, dtype, None, interface.get("stream"),
                              bool(readonly), array)
    if not is_device_array(array):
        raise FrameTypeError(f"expected a CUDA device array, got {type(array).__name__}")
    tensor = dlpack.read_tensor(array, 1)
    return RawDeviceArray(tensor.address, tensor.shape, tensor.strides_bytes, tensor.dtype,
                          tensor.device_id, None, False, tensor.view)
