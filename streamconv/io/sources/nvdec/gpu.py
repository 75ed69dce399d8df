"""The CUDA side of the NVDEC source: the device's primary context, a stream, the kernel that turns
a decoded surface into a slot's flat 4:2:0 planes, and the copies to and from host memory.

Every call here happens inside :meth:`NvdecGpu.active` (the context pushed, and popped after,
always), in the thread that reads the source.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterator

import numpy as np

from ....gpu import loader as kernel_loader
from ....gpu.device import load_binding
from ....gpu.binding import BoundLaunches
from ....frames.yuv import YuvLayout


@dataclass
class DecodedSurface:
    """A frame NVDEC decoded, still in its surface (valid until the decoder's next call)."""

    width: int
    height: int
    bits: int
    luma: int  # device address of the luma plane
    chroma: int  # device address of the interleaved U/V plane
    pts: int | None
    time_base: Fraction
    duration: int | None

    @property
    def time(self) -> float | None:
        return float(self.pts * self.time_base) if self.pts is not None else None


class NvdecGpu:
    """The source's CUDA objects: the primary context of its device, a stream, the conversion
    kernels (per depth) and a host-delivery staging buffer; every call inside :meth:`active`."""

    def __init__(self, device: int) -> None:
        self.binding = binding = load_binding("decoding with NVDEC")
        gpu = binding.device(device)
        self.context = gpu.retain_primary_context()
        major, minor = gpu.compute_capability
        self.arch = f"sm_{major}{minor}"
        self._kernels: dict[int, tuple[Any, BoundLaunches]] = {}
        self._staging: tuple[Any, np.ndarray] | None = None
        self._upload_staging: np.ndarray | None = None
        with self.active():
            self.stream: Any = binding.stream()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self.context.push()
        try:
            yield
        finally:
            self.context.pop()

    def convert(self, surface: DecodedSurface, target: int) -> None:
        """Queue the surface -> flat planes kernel (writing ``target``, a device address)."""
        sample_bytes = 2 if surface.bits > 8 else 1
        if sample_bytes not in self._kernels:
            module = kernel_loader.load_module("colour", {"SAMPLE_BYTES": sample_bytes}, self.arch,
                                               self.binding)
            kernel = module.kernel("semi_planar_to_planes", "PPiPiii")
            # the module is kept beside its kernel's launches, which need it
            self._kernels[sample_bytes] = (module, BoundLaunches(kernel, (32, 8, 1)))
        launches = self._kernels[sample_bytes][1]
        width, height = surface.width, surface.height
        pitch = width * sample_bytes
        grid = ((width // 2 + 31) // 32, (height // 2 + 7) // 8)
        launches(self.stream, grid, surface.luma, surface.chroma, pitch, target, width, height,
                 16 - surface.bits if surface.bits > 8 else 0)

    def to_host(self, surface: DecodedSurface, layout: YuvLayout) -> np.ndarray:
        """The surface as flat planes in a (reused) host array laid out as ``layout``."""
        staging = self._staging
        if staging is None or staging[1].shape != layout.shape or staging[1].dtype != layout.dtype:
            self.free_staging()
            self._staging = (self.binding.alloc(layout.nbytes),
                             self.binding.alloc_host(layout.shape, layout.dtype))
        device, host = self._staging
        self.convert(surface, int(device))
        self.binding.copy_dtoh(host, int(device), self.stream)
        self.stream.synchronize()
        return host

    def upload(self, planes: np.ndarray, target: int) -> None:
        """Copy flat host planes to ``target`` (a device address) on the stream, waiting for the
        copy (the host array is reused at once)."""
        staging = self._pinned(planes.shape, planes.dtype)
        np.copyto(staging, planes)
        self.binding.copy_htod(target, staging, self.stream)
        self.stream.synchronize()

    def _pinned(self, shape: tuple, dtype) -> np.ndarray:
        if self._upload_staging is None or self._upload_staging.shape != shape or \
                self._upload_staging.dtype != dtype:
            if self._upload_staging is not None:
                self._upload_staging.base.free()
            self._upload_staging = self.binding.alloc_host(shape, dtype)
        return self._upload_staging

    def free_staging(self) -> None:
        if self._staging is not None:
            device, host = self._staging
            device.free()
            host.base.free()
            self._staging = None
        if self._upload_staging is not None:
            self._upload_staging.base.free()
            self._upload_staging = None

    def close(self) -> None:
        with contextlib.suppress(*self.binding.errors):
            with self.active():
                self.stream.synchronize()
                self.free_staging()
                self._kernels.clear()
                self.stream = None  # destroyed now, while its context is held
        self.context.release()
