"""A caller's CUDA stream read as the raw handle the driver API takes, whatever library made it.

Stream handles are ints: 0 the legacy default stream, 1 ``CU_STREAM_LEGACY``, 2
``CU_STREAM_PER_THREAD``, else a ``CUstream``.
"""

from __future__ import annotations

from typing import Any

from ..errors import FrameTypeError


def stream_handle(stream: Any) -> int:
    """The CUstream handle of ``stream``: an int, or an object of CuPy (``.ptr``), PyTorch
    (``.cuda_stream``), PyCUDA (``.handle``), Numba (``.handle.value``) or any that speaks the CUDA
    stream protocol (``__cuda_stream__()`` -> (version, handle)).

    Raises:
        FrameTypeError: an object that names no stream this way (a TypeError).
    """
    if isinstance(stream, bool):
        raise FrameTypeError("stream=: expected a CUDA stream or an int handle, got a bool")
    if isinstance(stream, int):
        if stream < 0:
            raise FrameTypeError(f"stream=: a handle is >= 0, got {stream}")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if callable(protocol):
        return int(protocol()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        value = getattr(value, "value", value)  # a ctypes c_void_p (Numba)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if value is None and attribute == "handle" and hasattr(stream, "handle"):
            return 0  # a ctypes NULL: the default stream
    raise FrameTypeError(f"stream=: {type(stream).__name__} names no CUDA stream (expected an int "
                         "handle, "
                         "or an object with __cuda_stream__, .cuda_stream, .ptr or .handle)")
