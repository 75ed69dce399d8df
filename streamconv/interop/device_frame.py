"""The device arrays streamconv returns: :class:`DeviceFrame`, from a :class:`DeviceFramePool`.

A DeviceFrame is a C-contiguous (H, W[, C]) uint8 or uint16 array in CUDA device memory that
CuPy, PyTorch, Numba and others take without a copy, through ``__cuda_array_interface__``
(``cupy.asarray(frame)``, ``torch.as_tensor(frame, device="cuda")``) or DLPack
(``torch.from_dlpack(frame)``, ``cupy.from_dlpack(frame)``). Its memory goes back to its pool
when the last reference (the frame, or a tensor made from it) is dropped, so a loop that keeps
one frame at a time allocates nothing after its first frames.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..gpu import dlpack, handles
from ..gpu.binding import Binding
from ..gpu.dlpack import contiguous_strides
from .reuse import ReusePool


class DeviceFramePool:
    """Device buffers of frames, reused once the frames are dropped (:class:`.reuse.ReusePool`).

    Args:
        gpu: the CUDA binding. device: the CUDA device ordinal the buffers are on.
        keep: free buffers kept per size (more are freed as they come back).

    Allocation happens in :meth:`lease`, with the pool's context current; buffers that come
    back after :meth:`close` are freed (the binding makes their own context current for it).
    """

    def __init__(self, gpu: Binding, device: int, *, keep: int = 4) -> None:
        self.device = device
        self.buffers = ReusePool(gpu.alloc, lambda allocation: allocation.free(), keep=keep)

    @property
    def allocated(self) -> int:
        """Buffers made so far (a steady loop makes none after its first frames)."""
        return self.buffers.allocated

    def lease(self, shape: tuple[int, ...], dtype: np.dtype, *, stream: int | None = None,
              done_event: Any = None) -> "DeviceFrame":
        """A DeviceFrame of ``shape`` and ``dtype`` (its contents undefined until written), with the
        caller's ``stream`` its filtering is ordered on and the event recorded after it."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        return DeviceFrame(_Lease(self.buffers, self.buffers.take(nbytes), nbytes), shape, dtype,
                           self.device, stream, done_event)

    def close(self) -> None:
        """Free the buffers held for reuse (call with the context current); idempotent."""
        self.buffers.close()


class _Lease:
    """A pool buffer on loan: back to the pool when the last holder lets it go."""

    def __init__(self, buffers: ReusePool, allocation, nbytes: int) -> None:
        self.buffers, self.allocation, self.nbytes = buffers, allocation, nbytes

    def __del__(self) -> None:
        self.buffers.give_back(self.allocation, self.nbytes)


class _Held:
    """Device memory another object owns (an nn result's buffer), held for a DeviceFrame."""

    def __init__(self, owner: Any, address: int, nbytes: int) -> None:
        self.owner, self.allocation, self.nbytes = owner, address, nbytes


def wrap_device_array(owner: Any, address: int, shape: tuple[int, ...], dtype: np.dtype,
                      device: int) -> "DeviceFrame":
    """A DeviceFrame over C-contiguous device memory that ``owner`` keeps alive (no copy)."""
    dtype = np.dtype(dtype)
    return DeviceFrame(_Held(owner, address, math.prod(shape) * dtype.itemsize), shape, dtype,
                       device, None, None)


class DeviceFrame:
    """A frame in CUDA device memory: C-contiguous ``shape`` of ``dtype`` on CUDA device ``device``.

    Attributes:
        shape, dtype, strides, nbytes, device: as a NumPy array's (``device``: the CUDA ordinal).
        ptr: the device address of its first sample.
        stream: the caller's stream its filtering was ordered on (``stream=``), or None. Consumers
            on another stream wait for it (``__cuda_array_interface__`` v3 names it;
            ``__dlpack__(stream=...)`` orders it).

    Keep a DeviceFrame, or the tensor made from it, alive while work on it is queued: its memory
    is reused once both are gone, as with any DLPack producer.
    """

    __slots__ = ("_lease", "shape", "dtype", "device", "stream", "_done_event", "__weakref__")

    def __init__(self, lease: _Lease | _Held, shape: tuple[int, ...], dtype: np.dtype, device: int,
                 stream: int | None, done_event: Any) -> None:
        self._lease = lease
        self.shape, self.dtype, self.device = tuple(shape), np.dtype(dtype), device
        self.stream, self._done_event = stream, done_event

    @property
    def ptr(self) -> int:
        return int(self._lease.allocation)

    @property
    def nbytes(self) -> int:
        return self._lease.nbytes

    @property
    def strides(self) -> tuple[int, ...]:
        return contiguous_strides(self.shape, self.dtype.itemsize)

    @property
    def __cuda_array_interface__(self) -> dict:
        # The interface reserves 0 (ambiguous): the null stream is named 1, the legacy default
        # stream.
        stream = 1 if self.stream == 0 else self.stream
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": stream}

    def synchronize(self) -> None:
        """Wait (on the host) until the frame's filtering is complete."""
        if self._done_event is not None:
            self._done_event.synchronize()

    def __dlpack__(self, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   **_: Any) -> Any:
        """A DLPack capsule of this frame; ``stream``: the consumer's stream, made to wait for the
        filtering (without the host waiting); ``max_version``: the newest DLPack it reads."""
        if stream not in (None, -1) and stream != self.stream and self._done_event is not None:
            handles.wait_event(stream, self._done_event.handle)
        return dlpack.export_tensor(self, self.ptr, self.shape, self.dtype, max_version)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack.DEVICE_CUDA, self.device

    def get(self, out: np.ndarray | None = None) -> np.ndarray:
        """Copy the frame to host memory (waiting for its filtering first): a new NumPy array, or
        ``out``."""
        from ..gpu.binding import binding  # a DeviceFrame exists only where a binding runs

        host = np.empty(self.shape, self.dtype) if out is None else out
        if host.shape != self.shape or host.dtype != self.dtype or not host.flags.c_contiguous:
            raise ValueError(f"out: expected a C-contiguous {self.shape} {self.dtype} array")
        gpu = binding()
        context = gpu.device(self.device).retain_primary_context()
        context.push()
        try:
            self.synchronize()
            gpu.copy_dtoh(host, self.ptr)
        finally:
            context.pop()
            context.release()
        return host

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceFrame(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device})"
