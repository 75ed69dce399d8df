"""NVRTC, NVIDIA's run-time CUDA compiler, through cuda-core's ``Program``: kernels compiled where
no toolkit is.

NVRTC ships as a wheel (``nvidia-cuda-nvrtc`` for CUDA 13, ``nvidia-cuda-nvrtc-cu12`` for CUDA 12;
the ``cuda`` and ``cuda12`` extras install it) that cuda-bindings finds (cuda-pathfinder: the
wheels first, then a toolkit's), so a machine with only the NVIDIA driver can compile the
specialisations that are not prebuilt. It compiles straight to machine code (a cubin) for the
GPU's own architecture: no PTX is left for the driver to translate, so a newer NVRTC of the same
major version as the driver works (CUDA's minor-version compatibility), and a newer major does not.

Nothing here needs a GPU: compiling only needs the library.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import KernelCompileError
from .binding import cuda_core

INSTALL_HINT = {13: 'pip install "streamconv[cuda]"', 12: 'pip install "streamconv[cuda12]"'}
"""The command that installs NVRTC (with the binding) for a driver of each CUDA major version."""

OPTIONS = {"std": "c++17", "device_as_default_execution_space": True}
"""C++17, and unannotated functions (a kernel's generic lambdas) taken as device code, as nvcc
does inside a kernel."""


@dataclass(frozen=True)
class Nvrtc:
    """The NVRTC library cuda-bindings loaded.

    Attributes:
        path: the shared library's file.
        version: (major, minor), as the library reports it.
    """

    path: str
    version: tuple[int, int]

    @property
    def label(self) -> str:
        """E.g. ``NVRTC 13.0``."""
        return f"NVRTC {self.version[0]}.{self.version[1]}"

    def describe(self) -> str:
        """E.g. ``NVRTC 13.0 (/.../libnvrtc.so.13)``."""
        return f"{self.label} ({self.path})"


@functools.lru_cache(maxsize=1)
def loaded() -> Nvrtc | None:
    """The NVRTC cuda-bindings uses (of its own CUDA major), or None: cuda-bindings is not
    installed, or no NVRTC library of its major is found; looked up once per process."""
    try:
        from cuda import pathfinder  # the cuda extra
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    try:
        library = pathfinder.load_nvidia_dynamic_lib("nvrtc")
        status, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # cuda-pathfinder's "not found", or a broken library: no NVRTC
        return None
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return None
    return Nvrtc(str(library.abs_path), (major, minor))


def find(driver_major: int | None = None) -> Nvrtc | None:
    """The NVRTC to compile with, or None: none is found, or its major version is newer than the
    driver's (``driver_major``, the CUDA major of the driver; None: any)."""
    found = loaded()
    if found is None or (driver_major is not None and found.version[0] > driver_major):
        return None
    return found


def compile_cubin(nvrtc: Nvrtc, source: str, name: str, arch: str, include_dir: str) -> bytes:
    """Compile CUDA C++ ``source`` to a cubin for ``arch`` (e.g. ``sm_90``).

    Args:
        nvrtc: the library (:func:`find`).
        source: the full source text (its ``#define`` lines included).
        name: the program's name, shown in the log.
        arch: the real architecture to build machine code for.
        include_dir: where its ``#include "..."`` files are.

    Returns:
        The cubin's bytes, for the binding's ``load_module``.

    Raises:
        KernelCompileError: NVRTC rejected it; the message carries NVRTC's log.
    """
    core = cuda_core()
    options = core.ProgramOptions(name=name, arch=arch, include_path=[include_dir], **OPTIONS)
    try:
        program = core.Program(source, "c++", options)
        try:
            return bytes(program.compile("cubin").code)
        finally:
            program.close()
    except Exception as exc:  # cuda-core's NVRTCError carries NVRTC's log in its message
        raise KernelCompileError(f"{nvrtc.label} failed to compile {name} for {arch}:\n"
                                 f"{str(exc).strip()}") from None
