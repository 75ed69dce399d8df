"""The default binding's modules and launches: a cubin or fatbin loaded into a context, its
kernels, and launches whose arguments are packed once into the array of pointers that
``cuLaunchKernel`` takes as it is (a repeated launch is one driver call).
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

from .binding import signature_slots
from .cuda_core_driver import SUCCESS, CudaCoreStream, check, cu, release

_MASK = {"P": (1 << 64) - 1, "Q": (1 << 64) - 1, "q": (1 << 64) - 1, "i": (1 << 32) - 1}


class PackedArguments:
    """Kernel arguments as ``cuLaunchKernel`` takes them: an array of pointers, one per parameter,
    into 8-byte slots, one per value (an int32 in a slot's first 4 bytes: little-endian hosts
    only); a by-value struct of 8-byte members (``[PP]``) is its members' slots in a row, its
    pointer at the first."""

    def __init__(self, signature: str, args: Sequence[int]) -> None:
        kinds, starts = signature_slots(signature)
        if len(args) != len(kinds):
            raise TypeError(f"kernel takes {len(kinds)} arguments ({signature}), "
                            f"got {len(args)}")
        values = (int(value) & _MASK[kind] for kind, value in zip(kinds, args))
        self.values = (ctypes.c_uint64 * max(1, len(kinds)))(*values)
        base = ctypes.addressof(self.values)
        self.pointers = (ctypes.c_void_p * max(1, len(starts)))(*(base + 8 * k for k in starts))
        self.address = ctypes.addressof(self.pointers) if starts else 0


def _dims(shape: tuple[int, ...]) -> tuple[int, int, int]:
    return (tuple(int(n) for n in shape) + (1, 1, 1))[:3]  # type: ignore[return-value]


class CudaCoreLaunch:
    """One launch, its arguments packed once: a single ``cuLaunchKernel`` call per run."""

    __slots__ = ("_arguments", "_head")

    def __init__(self, function: Any, grid: tuple[int, ...], block: tuple[int, ...],
                 arguments: PackedArguments) -> None:
        self._head = (function, *_dims(grid), *_dims(block), 0)
        self._arguments = arguments

    def __call__(self, stream: CudaCoreStream | None) -> None:
        error = cu.cuLaunchKernel(*self._head, 0 if stream is None else stream.handle,
                                  self._arguments.address, 0)[0]
        if error != SUCCESS:
            check((error,), "cuLaunchKernel")


class CudaCoreKernel:
    """A kernel of a module with its argument signature."""

    def __init__(self, module: CudaCoreModule, name: str, signature: str) -> None:
        self._module = module  # the module must outlive its functions
        self.function = check(cu.cuModuleGetFunction(module.module, name.encode()),
                              f"cuModuleGetFunction {name}")
        self.signature = signature

    def attribute(self, name: str) -> int:
        code = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name.upper()}")
        return check(cu.cuFuncGetAttribute(code, self.function), "cuFuncGetAttribute")

    def bind(self, grid: tuple[int, ...], block: tuple[int, ...], *args: int) -> CudaCoreLaunch:
        return CudaCoreLaunch(self.function, grid, block, PackedArguments(self.signature, args))

    def launch(self, stream: CudaCoreStream | None, grid: tuple[int, ...], block: tuple[int, ...],
               *args: int) -> None:
        self.bind(grid, block, *args)(stream)


class CudaCoreModule:
    """A module loaded into the current context, unloaded (in it) when dropped."""

    def __init__(self, image: bytes) -> None:
        self._context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        self.module = check(cu.cuModuleLoadData(image), "cuModuleLoadData")

    def kernel(self, name: str, signature: str) -> CudaCoreKernel:
        return CudaCoreKernel(self, name, signature)

    def global_address(self, name: str) -> tuple[int, int]:
        address, size = check(cu.cuModuleGetGlobal(self.module, name.encode()),
                              f"cuModuleGetGlobal {name}")
        return int(address), int(size)

    def __del__(self) -> None:
        if cu is not None and getattr(self, "module", None) is not None:
            release(self._context, cu.cuModuleUnload, self.module)


