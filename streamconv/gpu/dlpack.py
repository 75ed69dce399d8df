"""DLPack in and out through cuda-core: a producer's device tensor read (``StridedMemoryView``),
and device memory streamconv owns exported as a tensor consumers take without a copy.

cuda-core is imported on first use (:func:`.binding.cuda_core`), whichever binding runs the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FrameTypeError
from .binding import cuda_core

DEVICE_CPU, DEVICE_CUDA, DEVICE_CUDA_HOST, DEVICE_CUDA_MANAGED = 1, 2, 3, 13
"""``DLDeviceType`` values streamconv meets."""


@dataclass(slots=True)
class ImportedTensor:
    """What a producer's ``__dlpack__`` described: its first element's address, shape, strides in
    bytes, dtype, DLPack device and the view that holds the producer's tensor until dropped."""

    address: int
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    dtype: np.dtype
    device_type: int
    device_id: int
    view: Any


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides in bytes of a C-contiguous array of ``shape`` (plain Python: per frame)."""
    steps, step = [], itemsize
    for size in reversed(shape):
        steps.append(step)
        step *= size
    return tuple(reversed(steps))


def read_tensor(array: Any, stream: int | None) -> ImportedTensor:
    """Read ``array`` through its ``__dlpack__``, asked for on ``stream`` (a handle: the producer
    orders its pending work before it; -1: no ordering).

    Raises:
        FrameTypeError: not a plain number type (bool, complex, vectors).
        BackendUnavailableError: cuda-core is not installed.
    """
    view = cuda_core().utils.StridedMemoryView.from_dlpack(array, stream_ptr=stream)
    dtype = view.dtype
    if dtype is None or dtype.kind not in "iuf":
        raise FrameTypeError(f"DLPack dtype {dtype} is not a plain number type; "
                             "frames are uint8 or uint16")
    shape = tuple(view.shape)
    strides = view.strides
    steps = (contiguous_strides(shape, dtype.itemsize) if strides is None
             else tuple(step * dtype.itemsize for step in strides))
    kind = DEVICE_CUDA if view.is_device_accessible and view.device_id >= 0 else DEVICE_CPU
    return ImportedTensor(int(view.ptr), shape, steps, dtype, kind, int(view.device_id), view)


def export_tensor(owner: Any, address: int, shape: tuple[int, ...], dtype: np.dtype,
                  max_version: tuple[int, int] | None = None) -> Any:
    """A DLPack capsule of the C-contiguous device array of ``shape`` and ``dtype`` at
    ``address``; ``owner`` is kept alive until the consumer lets the tensor go. The caller has
    ordered the consumer's stream after the array's writes already.
    """
    core = cuda_core()
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buffer = core.Buffer.from_handle(address, nbytes, owner=owner)
    view = core.utils.StridedMemoryView.from_buffer(buffer, tuple(shape), dtype=dtype)
    if max_version is None:
        return view.__dlpack__(stream=-1)
    return view.__dlpack__(stream=-1, max_version=max_version)
