"""The default CUDA binding: NVIDIA's cuda-bindings (the driver API) and cuda-core, from wheels.

The driver calls are cuda-bindings' (:mod:`.cuda_core_driver`, :mod:`.cuda_core_modules`); cuda-core
compiles (NVRTC, in :mod:`streamconv.gpu.nvrtc`) and exchanges DLPack tensors (:mod:`.dlpack`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any, Sequence

import numpy as np

from .setup import find_driver
from ..errors import BackendUnavailableError
from .binding import GpuCallError, GpuMemoryError, packages_missing
from .cuda_core_driver import (
                               IMPORT_ERROR,
                               CudaCoreBuffer,
                               CudaCoreCopy2D,
                               CudaCoreDevice,
                               CudaCoreEvent,
                               CudaCoreStream,
                               PinnedBlock,
                               check,
                               cu,
                               )
from .cuda_core_modules import CudaCoreModule

NAME = "cuda-core"


class CudaCoreBinding:
    """The binding object: module-level calls of the driver API (see :class:`.binding.Binding`)."""

    name = NAME
    errors: tuple[type[BaseException], ...] = (GpuCallError,)
    memory_errors: tuple[type[BaseException], ...] = (GpuMemoryError,)

    def describe(self) -> str:
        return ", ".join(f"{name} {_version(name)}" for name in ("cuda-core", "cuda-bindings"))

    def driver_version(self) -> int:
        return check(cu.cuDriverGetVersion(), "cuDriverGetVersion")

    def device_count(self) -> int:
        return check(cu.cuDeviceGetCount(), "cuDeviceGetCount")

    def device(self, ordinal: int) -> CudaCoreDevice:
        return CudaCoreDevice(ordinal)

    def current_context(self) -> int | None:
        return int(check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")) or None

    def current_device(self) -> CudaCoreDevice:
        return CudaCoreDevice(int(check(cu.cuCtxGetDevice(), "cuCtxGetDevice")))

    def synchronize(self) -> None:
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def stream(self) -> CudaCoreStream:
        return CudaCoreStream()

    def event(self, *, timing: bool = True, blocking: bool = False) -> CudaCoreEvent:
        return CudaCoreEvent(timing=timing, blocking=blocking)

    def mem_get_info(self) -> tuple[int, int]:
        free, total = check(cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    def alloc(self, nbytes: int) -> CudaCoreBuffer:
        return CudaCoreBuffer(check(cu.cuMemAlloc(max(1, nbytes)), "cuMemAlloc"), nbytes)

    def alloc_pitch(self, width_bytes: int, height: int) -> tuple[CudaCoreBuffer, int]:
        address, pitch = check(cu.cuMemAllocPitch(width_bytes, height, 16), "cuMemAllocPitch")
        return CudaCoreBuffer(address, pitch * height), int(pitch)

    def alloc_host(self, shape: Sequence[int] | int, dtype: Any, *,
                   portable: bool = False) -> np.ndarray:
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
        return np.asarray(PinnedBlock(shape, np.dtype(dtype), portable))

    def copy_htod(self, dst: int, src: np.ndarray, stream: CudaCoreStream | None = None) -> None:
        if stream is None:
            check(cu.cuMemcpyHtoD(dst, src.ctypes.data, src.nbytes), "cuMemcpyHtoD")
        else:
            check(cu.cuMemcpyHtoDAsync(dst, src.ctypes.data, src.nbytes, stream.handle),
                  "cuMemcpyHtoDAsync")

    def copy_dtoh(self, dst: np.ndarray, src: int, stream: CudaCoreStream | None = None) -> None:
        if stream is None:
            check(cu.cuMemcpyDtoH(dst.ctypes.data, src, dst.nbytes), "cuMemcpyDtoH")
        else:
            check(cu.cuMemcpyDtoHAsync(dst.ctypes.data, src, dst.nbytes, stream.handle),
                  "cuMemcpyDtoHAsync")

    def copy_dtod(self, dst: int, src: int, nbytes: int) -> None:
        check(cu.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")

    def memset_d8(self, dst: int, value: int, nbytes: int) -> None:
        check(cu.cuMemsetD8(dst, value, nbytes), "cuMemsetD8")

    def copy_2d(self, width_bytes: int, height: int, *, src_pitch: int, dst_pitch: int,
                src_device: int | None = None, dst_device: int | None = None) -> CudaCoreCopy2D:
        return CudaCoreCopy2D(width_bytes, height, src_pitch, dst_pitch, src_device, dst_device)

    def load_module(self, image: bytes) -> CudaCoreModule:
        return CudaCoreModule(image)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def bindings_major() -> int:
    """The CUDA major version cuda-bindings was made for (12 or 13)."""
    import cuda.bindings

    return int(cuda.bindings.__version__.split(".")[0])


def load() -> CudaCoreBinding:
    """The binding, the driver initialized.

    Raises:
        BackendUnavailableError: cuda-bindings or cuda-core missing, no driver, or a driver of an
            older CUDA major than the installed cuda-bindings (CUDA 12 drivers need the ``cuda12``
            extra).
    """
    if IMPORT_ERROR is not None:
        raise packages_missing(NAME, IMPORT_ERROR)
    if importlib.util.find_spec("cuda.core") is None:
        raise packages_missing(NAME, ImportError(name="cuda.core"))
    driver = find_driver()  # asked of libcuda itself: cuda-bindings may not load an older one
    if driver is not None and driver.major < bindings_major():
        raise BackendUnavailableError(
            f"the NVIDIA driver runs CUDA {driver.major}.{driver.minor}, older than the installed "
            f"cuda-bindings {_version('cuda-bindings')}: pip install \"streamconv[cuda12]\" for a "
            "CUDA 12 driver, or update the driver (580 or later runs CUDA 13)")
    try:
        check(cu.cuInit(0), "cuInit")
    except Exception as exc:  # no libcuda (cuda-pathfinder's error), or cuInit failed
        raise BackendUnavailableError(f"no usable NVIDIA driver ({_reason(exc)})") from None
    return CudaCoreBinding()


def _reason(exc: Exception) -> str:
    """A short reason for a failed driver start: the missing library, or the error."""
    if type(exc).__name__ == "DynamicLibNotFoundError":
        return "libcuda.so.1 not found: is the NVIDIA driver installed?"
    return str(exc)
