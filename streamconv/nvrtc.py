"""NVRTC, NVIDIA's run-time CUDA compiler, through ctypes: kernels compiled where no toolkit is.

NVRTC is a shared library that ships as a wheel (``nvidia-cuda-nvrtc`` for CUDA 13,
``nvidia-cuda-nvrtc-cu12`` for CUDA 12), so a machine with only the NVIDIA driver can compile the
specialisations that are not prebuilt. It compiles straight to machine code (a cubin) for the
GPU's own architecture: no PTX is left for the driver to translate, so a newer NVRTC of the same
major version as the driver works (CUDA's minor-version compatibility), and a newer major does not.

Nothing here needs a GPU: compiling only needs the library.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import KernelCompileError

INSTALL_HINT = {13: "pip install nvidia-cuda-nvrtc", 12: "pip install nvidia-cuda-nvrtc-cu12"}
"""The command that installs NVRTC for a driver of each CUDA major version."""

_WHEEL_LIBRARIES = ("nvidia/cu*/lib/libnvrtc.so.*", "nvidia/cuda_nvrtc/lib/libnvrtc.so.*")
"""Where NVRTC's wheels put the library under site-packages (CUDA 13's layout, then CUDA 12's)."""

_SONAME = re.compile(r"libnvrtc\.so\.(\d+)$")


@dataclass(frozen=True)
class Nvrtc:
    """A loaded NVRTC library.

    Attributes:
        path: the shared library's file.
        version: (major, minor), as the library reports it.
        library: the ctypes handle.
    """

    path: str
    version: tuple[int, int]
    library: ctypes.CDLL

    @property
    def label(self) -> str:
        """E.g. ``NVRTC 13.0``."""
        return f"NVRTC {self.version[0]}.{self.version[1]}"

    def describe(self) -> str:
        """E.g. ``NVRTC 13.0 (/.../libnvrtc.so.13)``."""
        return f"{self.label} ({self.path})"


def candidate_paths() -> list[str]:
    """NVRTC libraries on this machine, wheels first (site-packages in sys.path order), then a
    toolkit's (CUDA_HOME, CUDA_PATH, /usr/local/cuda), highest major version first within each."""
    wheels: list[str] = []
    for entry in sys.path:
        for pattern in _WHEEL_LIBRARIES:
            wheels.extend(glob.glob(os.path.join(entry or ".", pattern)))
    toolkits: list[str] = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            toolkits.extend(glob.glob(os.path.join(root, "lib64", "libnvrtc.so.*")))
    ordered = []
    for group in (wheels, toolkits):
        for path in sorted(dict.fromkeys(p for p in group if _SONAME.search(p)), key=_major, reverse=True):
            if path not in ordered:
                ordered.append(path)
    return ordered


def _major(path: str) -> int:
    match = _SONAME.search(path)
    return int(match.group(1)) if match else 0


@functools.lru_cache(maxsize=None)
def load(path: str) -> Nvrtc:
    """Load the NVRTC library at ``path`` and read its version.

    Raises:
        OSError: it cannot be loaded.
    """
    # NVRTC opens its builtins library by name at the first compile; a wheel's folder is not on
    # the loader's path, so it is loaded first, globally, from beside the library
    for builtins in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*"))):
        try:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue  # a stub or another version's: NVRTC names the one it misses
    library = ctypes.CDLL(path)
    library.nvrtcGetErrorString.restype = ctypes.c_char_p
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(library, library.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return Nvrtc(str(Path(path).resolve()), (major.value, minor.value), library)


def find(driver_major: int | None = None) -> Nvrtc | None:
    """The NVRTC to compile with: the first of :func:`candidate_paths` that loads and whose major
    version the driver runs (``driver_major``, the CUDA major of the driver; None: any), or None."""
    for path in candidate_paths():
        if driver_major is not None and _major(path) > driver_major:
            continue
        try:
            return load(path)
        except OSError:
            continue  # a broken or foreign library: try the next
    return None


def compile_cubin(nvrtc: Nvrtc, source: str, name: str, arch: str, include_dir: str,
                  options: tuple[str, ...] = ("-std=c++17", "--device-as-default-execution-space")) -> bytes:
    """Compile CUDA C++ ``source`` to a cubin for ``arch`` (e.g. ``sm_90``).

    Args:
        nvrtc: the library (:func:`find`).
        source: the full source text (its ``#define`` lines included).
        name: the program's name, shown in the log.
        arch: the real architecture to build machine code for.
        include_dir: where its ``#include "..."`` files are.
        options: further NVRTC options (by default C++17, and unannotated functions, such as a
            kernel's generic lambdas, taken as device code, as nvcc does inside a kernel).

    Returns:
        The cubin's bytes, for ``cuModuleLoadData`` (PyCUDA's ``module_from_buffer``).

    Raises:
        KernelCompileError: NVRTC rejected it; the message carries NVRTC's log.
    """
    lib = nvrtc.library
    program = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        args = [f"--gpu-architecture={arch}", f"--include-path={include_dir}", *options]
        argv = (ctypes.c_char_p * len(args))(*(a.encode() for a in args))
        status = lib.nvrtcCompileProgram(program, len(args), argv)
        if status != 0:
            raise KernelCompileError(f"{nvrtc.label} failed to compile {name} for {arch}:\n{_log(lib, program)}")
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(program, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _log(lib: ctypes.CDLL, program: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    if lib.nvrtcGetProgramLogSize(program, ctypes.byref(size)) != 0:
        return "(no log)"
    text = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(program, text)
    return text.value.decode(errors="replace").strip()


def _check(lib: ctypes.CDLL, status: int, call: str) -> None:
    if status != 0:
        reason = lib.nvrtcGetErrorString(status) if hasattr(lib, "nvrtcGetErrorString") else None
        raise KernelCompileError(f"{call} failed: {reason.decode() if reason else status}")
