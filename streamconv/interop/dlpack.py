"""DLPack capsules through ctypes: exporting a device buffer that a consumer (``torch.from_dlpack``,
``cupy.from_dlpack``) takes without a copy, and reading one a producer gives us.

The legacy (unversioned) ``dltensor`` capsule, which every consumer and producer speaks when no
``max_version`` is asked for. The layout is the DLPack header's (``dlpack.h``, ABI 0.x).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FrameTypeError

DEVICE_CPU, DEVICE_CUDA, DEVICE_CUDA_HOST, DEVICE_CUDA_MANAGED = 1, 2, 3, 13
"""``DLDeviceType`` values streamconv meets."""

_CODES = {"i": 0, "u": 1, "f": 2}
_KINDS = {code: kind for kind, code in _CODES.items()}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool"}
_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedTensor))
_ManagedTensor._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = (ctypes.py_object, ctypes.c_char_p)

# Exported tensors by their struct's address: what keeps the struct, its shape and strides and
# the buffer's owner alive until the consumer calls the deleter.
_EXPORTED: dict[int, tuple] = {}
_EXPORTED_LOCK = threading.Lock()


@_Deleter
def _delete_exported(managed) -> None:
    address = ctypes.cast(managed, ctypes.c_void_p).value
    with _EXPORTED_LOCK:
        _EXPORTED.pop(address, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destroy_capsule(capsule: int) -> None:
    # Never consumed (still named "dltensor"): the capsule owns the tensor, so it deletes it.
    # A consumer that refuses the tensor (NumPy for CUDA memory, an older PyTorch for uint16)
    # drops the capsule with its own error pending, which makes the first ctypes call here raise
    # it; the tensor is deleted all the same (else its owner, a pooled frame, is never given
    # back) and the error re-raised, for Python to report as unraisable.
    pending = None
    try:
        valid = _api.PyCapsule_IsValid(capsule, _NAME)
    except BaseException as error:  # the consumer's, now cleared: the calls below work
        pending, valid = error, _api.PyCapsule_IsValid(capsule, _NAME)
    if valid:
        _delete_exported(ctypes.cast(_api.PyCapsule_GetPointer(capsule, _NAME),
                                     ctypes.POINTER(_ManagedTensor)))
    if pending is not None:
        raise pending


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides in bytes of a C-contiguous array of ``shape`` (plain Python: called per frame)."""
    steps, step = [], itemsize
    for size in reversed(shape):
        steps.append(step)
        step *= size
    return tuple(reversed(steps))


def export_capsule(owner: Any, address: int, shape: tuple[int, ...], strides_bytes: tuple[int, ...],
                   dtype: np.dtype, device_type: int, device_id: int) -> Any:
    """A ``dltensor`` capsule of the buffer at ``address`` (``owner`` is kept alive until the
    consumer is done with it).

    Args:
        shape: the array's shape. strides_bytes: its strides in bytes, each a multiple of the item size.
        dtype: an integer or float NumPy dtype. device_type, device_id: where the buffer is (DEVICE_*).
    """
    dtype = np.dtype(dtype)
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * ndim)(*shape)
    strides_array = (ctypes.c_int64 * ndim)(*(step // dtype.itemsize for step in strides_bytes))
    managed = _ManagedTensor()
    managed.dl_tensor = _Tensor(address, _Device(device_type, device_id), ndim,
                                _DataType(_CODES[dtype.kind], dtype.itemsize * 8, 1),
                                shape_array, strides_array, 0)
    managed.deleter = _delete_exported
    pointer = ctypes.addressof(managed)
    with _EXPORTED_LOCK:
        _EXPORTED[pointer] = (managed, shape_array, strides_array, owner)
    return _api.PyCapsule_New(pointer, _NAME, ctypes.cast(_destroy_capsule, ctypes.c_void_p))


@dataclass
class ImportedTensor:
    """What a ``dltensor`` capsule describes; ``close()`` hands it back to its producer."""

    address: int
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    dtype: np.dtype
    device_type: int
    device_id: int
    _managed: Any = None

    def close(self) -> None:
        """Tell the producer the buffer is no longer used (its deleter); idempotent."""
        managed, self._managed = self._managed, None
        if managed is not None and managed.contents.deleter:
            managed.contents.deleter(managed)

    def __del__(self) -> None:
        self.close()


def import_capsule(capsule: Any) -> ImportedTensor:
    """Take a ``dltensor`` capsule (marking it used, as DLPack asks) and read its tensor.

    Raises:
        FrameTypeError: not an unused ``dltensor`` capsule, or not a plain number type (bool,
            complex, vectors).
    """
    if not _api.PyCapsule_IsValid(id(capsule), _NAME):
        raise FrameTypeError("not an unused DLPack 'dltensor' capsule")
    managed = ctypes.cast(_api.PyCapsule_GetPointer(id(capsule), _NAME), ctypes.POINTER(_ManagedTensor))
    _api.PyCapsule_SetName(capsule, _USED_NAME)  # ours now: the capsule no longer deletes it
    tensor = managed.contents.dl_tensor
    imported = ImportedTensor(0, (), (), np.dtype(np.uint8), tensor.device.device_type, tensor.device.device_id,
                              managed)
    if tensor.dtype.lanes != 1 or tensor.dtype.code not in _KINDS:
        raise FrameTypeError(f"DLPack dtype code {tensor.dtype.code} x{tensor.dtype.lanes} lanes "
                             f"({_CODE_NAMES.get(tensor.dtype.code, 'unknown')}) is not a plain number type; "
                             "frames are uint8 or uint16")
    imported.dtype = np.dtype(f"{_KINDS[tensor.dtype.code]}{tensor.dtype.bits // 8}")
    imported.shape = tuple(tensor.shape[k] for k in range(tensor.ndim))
    if tensor.strides:
        imported.strides_bytes = tuple(tensor.strides[k] * imported.dtype.itemsize for k in range(tensor.ndim))
    else:  # NULL: C-contiguous
        imported.strides_bytes = contiguous_strides(imported.shape, imported.dtype.itemsize)
    imported.address = (tensor.data or 0) + tensor.byte_offset
    return imported
