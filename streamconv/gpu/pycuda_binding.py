"""The PyCUDA binding: the design card's, built from source (``streamconv install-cuda``).

PyCUDA's own objects serve where their calls are the seam's (devices, contexts, streams, events,
memory); thin classes adapt the rest. A launch's arguments are packed once with PyCUDA's own
``prepare`` format and handed to its launcher as they are, so a repeated launch costs one call,
as with the default binding. NVRTC, DLPack and calls on other libraries' handles come from
cuda-bindings and cuda-core (the ``pycuda`` extra installs them too).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError
from .binding import GpuCallError, GpuMemoryError, packages_missing, signature_slots

NAME = "pycuda"

try:  # the pycuda extra; its absence is reported by load()
    from pycuda import driver
    from pycuda._pvt_struct import pack
except ImportError as missing:  # pragma: no cover - depends on the installation
    driver = None
    _IMPORT_ERROR: ImportError | None = missing
else:
    _IMPORT_ERROR = None


class PycudaDevice:
    """A GPU by ordinal."""

    def __init__(self, device: Any, ordinal: int) -> None:
        self._device = device
        self.ordinal = ordinal
        self.name = device.name()
        self.compute_capability = device.compute_capability()

    def attribute(self, name: str) -> int:
        return self._device.get_attribute(getattr(driver.device_attribute, name))

    def retain_primary_context(self) -> PycudaContext:
        return PycudaContext(self._device.retain_primary_context())


def _ordinal(device: Any) -> int:
    """PyCUDA names no device's ordinal: the index whose Device equals ``device``."""
    return next(n for n in range(driver.Device.count()) if driver.Device(n) == device)


class PycudaContext:
    """A retain of a primary context (PyCUDA keeps its own stack of pushed contexts)."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self.handle = context.handle
        self._retained = True

    def push(self) -> None:
        self._context.push()

    def pop(self) -> None:
        driver.Context.pop()

    def release(self) -> None:
        if self._retained:
            self._retained = False
            self._context.detach()


class PycudaCopy2D:
    """PyCUDA's ``Memcpy2D``, prepared once; called with a stream, or synchronously."""

    def __init__(self, width_bytes: int, height: int, src_pitch: int, dst_pitch: int,
                 src_device: int | None, dst_device: int | None) -> None:
        self._copy = copy = driver.Memcpy2D()
        if src_device is not None:
            copy.set_src_device(src_device)
        if dst_device is not None:
            copy.set_dst_device(dst_device)
        copy.src_pitch, copy.dst_pitch = src_pitch, dst_pitch
        copy.width_in_bytes, copy.height = width_bytes, height

    def set_src_host(self, array: np.ndarray) -> None:
        self._copy.set_src_host(array)

    def set_dst_host(self, array: np.ndarray) -> None:
        self._copy.set_dst_host(array)

    def set_dst_device(self, address: int, pitch: int) -> None:
        self._copy.set_dst_device(address)
        self._copy.dst_pitch = pitch

    def __call__(self, stream: Any = None) -> None:
        if stream is None:
            self._copy(False)  # False: unaligned, synchronous
        else:
            self._copy(stream)


class PycudaLaunch:
    """One launch, its arguments packed once with PyCUDA's format."""

    __slots__ = ("_block", "_buffer", "_function", "_grid")

    def __init__(self, function: Any, grid: tuple[int, ...], block: tuple[int, ...],
                 buffer: bytes) -> None:
        self._function, self._buffer = function, buffer
        self._grid, self._block = tuple(grid), tuple(block)

    def __call__(self, stream: Any) -> None:
        self._function._launch_kernel(self._grid, self._block, self._buffer, 0, stream)


class PycudaKernel:
    """A PyCUDA function prepared with the kernel's signature."""

    def __init__(self, module: Any, name: str, signature: str) -> None:
        self._module = module  # the module must outlive its functions
        self.function = module.get_function(name)
        # PyCUDA packs the values in a row, natively aligned: a struct of 8-byte members, laid
        # out as the kernel expects, without its brackets.
        self.values = signature_slots(signature)[0]
        self.function.prepare(self.values)
        self.signature = signature

    def attribute(self, name: str) -> int:
        return getattr(self.function, name)

    def bind(self, grid: tuple[int, ...], block: tuple[int, ...], *args: int) -> PycudaLaunch:
        if len(args) != len(self.values):
            raise TypeError(f"kernel takes {len(self.values)} arguments ({self.signature}), "
                            f"got {len(args)}")
        return PycudaLaunch(self.function, grid, block, pack(self.function.arg_format, *args))

    def launch(self, stream: Any, grid: tuple[int, ...], block: tuple[int, ...],
               *args: int) -> None:
        self.bind(grid, block, *args)(stream)


class PycudaModule:
    """A PyCUDA module (its own constant memory); unloaded by PyCUDA when dropped."""

    def __init__(self, image: bytes) -> None:
        self.module = driver.module_from_buffer(image)

    def kernel(self, name: str, signature: str) -> PycudaKernel:
        return PycudaKernel(self.module, name, signature)

    def global_address(self, name: str) -> tuple[int, int]:
        address, size = self.module.get_global(name)
        return int(address), int(size)


class PycudaBinding:
    """The binding object (see :class:`.binding.Binding`)."""

    name = NAME
    errors: tuple[type[BaseException], ...] = \
        (GpuCallError, driver.Error) if driver else (GpuCallError,)
    memory_errors: tuple[type[BaseException], ...] = \
        (GpuMemoryError, driver.MemoryError) if driver else (GpuMemoryError,)

    def describe(self) -> str:
        return f"pycuda {importlib.metadata.version('pycuda')}"

    def driver_version(self) -> int:
        return driver.get_driver_version()

    def device_count(self) -> int:
        return driver.Device.count()

    def device(self, ordinal: int) -> PycudaDevice:
        return PycudaDevice(driver.Device(ordinal), ordinal)

    def current_context(self) -> int | None:
        context = driver.Context.get_current()
        return None if context is None else context.handle

    def current_device(self) -> PycudaDevice:
        device = driver.Context.get_device()
        return PycudaDevice(device, _ordinal(device))

    def synchronize(self) -> None:
        driver.Context.synchronize()

    def stream(self) -> Any:
        return driver.Stream()

    def event(self, *, timing: bool = True, blocking: bool = False) -> Any:
        flags = (0 if timing else driver.event_flags.DISABLE_TIMING) | \
            (driver.event_flags.BLOCKING_SYNC if blocking else 0)
        return driver.Event(flags)

    def mem_get_info(self) -> tuple[int, int]:
        return driver.mem_get_info()

    def alloc(self, nbytes: int) -> Any:
        return driver.mem_alloc(max(1, nbytes))

    def alloc_pitch(self, width_bytes: int, height: int) -> tuple[Any, int]:
        return driver.mem_alloc_pitch(width_bytes, height, 16)

    def alloc_host(self, shape: Sequence[int] | int, dtype: Any, *,
                   portable: bool = False) -> np.ndarray:
        flags = driver.host_alloc_flags.PORTABLE if portable else 0
        return driver.pagelocked_empty(shape, dtype, mem_flags=flags)

    def copy_htod(self, dst: int, src: np.ndarray, stream: Any = None) -> None:
        if stream is None:
            driver.memcpy_htod(dst, src)
        else:
            driver.memcpy_htod_async(dst, src, stream)

    def copy_dtoh(self, dst: np.ndarray, src: int, stream: Any = None) -> None:
        if stream is None:
            driver.memcpy_dtoh(dst, src)
        else:
            driver.memcpy_dtoh_async(dst, src, stream)

    def copy_dtod(self, dst: int, src: int, nbytes: int) -> None:
        driver.memcpy_dtod(dst, src, nbytes)

    def memset_d8(self, dst: int, value: int, nbytes: int) -> None:
        driver.memset_d8(dst, value, nbytes)

    def copy_2d(self, width_bytes: int, height: int, *, src_pitch: int, dst_pitch: int,
                src_device: int | None = None, dst_device: int | None = None) -> PycudaCopy2D:
        return PycudaCopy2D(width_bytes, height, src_pitch, dst_pitch, src_device, dst_device)

    def load_module(self, image: bytes) -> PycudaModule:
        return PycudaModule(image)


def load() -> PycudaBinding:
    """The binding, the driver initialized.

    Raises:
        BackendUnavailableError: PyCUDA missing, or no usable driver.
    """
    if _IMPORT_ERROR is not None:
        raise packages_missing(NAME, _IMPORT_ERROR)
    try:
        driver.init()
    except driver.Error as exc:
        raise BackendUnavailableError(f"no usable NVIDIA driver ({exc})") from None
    return PycudaBinding()
