"""Any CUDA device array as its producer describes it (``__cuda_array_interface__`` or DLPack):
what :mod:`.arrays` checks as a frame and :mod:`streamconv.nn` reads as a tensor."""

from __future__ import annotations

import functools
import sys
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


_TORCH_DTYPES = {"torch.uint8": "|u1", "torch.uint16": "<u2", "torch.int8": "|i1",
                  "torch.int16": "<i2", "torch.int32": "<i4", "torch.int64": "<i8",
                  "torch.float16": "<f2", "torch.float32": "<f4", "torch.float64": "<f8"}


def torch_device_array(array: Any) -> RawDeviceArray | None:
    """A PyTorch CUDA tensor (exactly ``torch.Tensor``) read through its own accessors, or None
    for anything else (a host tensor, a subclass, a dtype NumPy lacks). PyTorch builds
    ``__cuda_array_interface__`` in Python on every read (a dict of its dtypes included), several
    times the cost of these C calls; the description is the same, with the device ordinal.

    Raises:
        FrameTypeError: a tensor that requires grad (PyTorch refuses its interface too).
    """
    torch = sys.modules.get("torch")
    if torch is None or type(array) is not torch.Tensor or not array.is_cuda:
        return None
    typestr = _TORCH_DTYPES.get(str(array.dtype))
    if typestr is None:
        return None
    if array.requires_grad:
        raise FrameTypeError("Tensor gives no __cuda_array_interface__: it requires grad (pass "
                             "tensor.detach())")
    dtype = _dtype(typestr)
    strides = tuple(step * dtype.itemsize for step in array.stride())
    address = array.data_ptr() if array.numel() else 0
    return RawDeviceArray(address, tuple(array.shape), strides, dtype, array.device.index, None,
                          False, array)


def raw_device_array(array: Any) -> RawDeviceArray:
    """Read a device array's description from ``__cuda_array_interface__`` (versions 0 to 3) or
    DLPack (asked for on the legacy default stream, 1, so that the producer's pending work comes
    first); a PyTorch tensor through :func:`torch_device_array`.

    Raises:
        FrameTypeError: neither interface, or a DLPack tensor that is not in CUDA memory.
    """
    fast = torch_device_array(array)
    if fast is not None:
        return fast
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
