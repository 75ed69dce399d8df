"""The one place CUDA kernels are compiled: read from the installed package, specialised, memoized.

A *specialisation* is a kernel file plus sorted ``#define``s, e.g.
``conv2d[BANKS=1,BORDER=reflect101,CHANNELS=3,RADIUS=2]``. Each is compiled with nvcc
(through PyCUDA) once per process and GPU architecture, and PyCUDA's on-disk cache keeps
the cubin across processes. A module instance is loaded per filter stage, because each
stage holds its own taps in the module's ``__constant__`` memory.

The CUDA backend and :mod:`streamconv.nn` both compile their kernels here; it sits beneath
both (it imports neither), so that nn imports no module of backends.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping

from .borders import BORDER_CODES
from .errors import BackendUnavailableError, KernelCompileError
from .resources import data_dir

log = logging.getLogger(__name__)

NVCC_OPTIONS = ("-O3", "-std=c++17")


def kernel_source(name: str) -> str:
    """The text of ``cuda/<name>.cu`` from this installation (never the working directory)."""
    path = data_dir("cuda") / f"{name}.cu"
    if not path.is_file():
        raise BackendUnavailableError(f"CUDA kernel source missing from the installation: {path}")
    return path.read_text(encoding="utf-8")


def specialisation_name(name: str, defines: Mapping[str, object]) -> str:
    """A log label such as ``conv2d[BORDER=reflect101,RADIUS=2]`` (border codes shown by name)."""
    shown = []
    for key in sorted(defines):
        value = defines[key]
        if key == "BORDER":
            value = {code: mode for mode, code in BORDER_CODES.items()}.get(value, value)
        shown.append(f"{key}={value}")
    return f"{name}[{','.join(shown)}]"


def with_defines(source: str, defines: Mapping[str, object]) -> str:
    """``source`` with ``#define KEY VALUE`` lines for each define, sorted, prepended."""
    header = "".join(f"#define {key} {defines[key]}\n" for key in sorted(defines))
    return header + source


@functools.lru_cache(maxsize=None)
def _compile_cached(name: str, define_items: tuple[tuple[str, object], ...], arch: str) -> bytes:
    defines = dict(define_items)
    label = specialisation_name(name, defines)
    if shutil.which("nvcc") is None:
        raise BackendUnavailableError(f"nvcc not found on PATH; it is needed to compile {label}")
    from pycuda import compiler  # optional (the cuda extra), and slow to import
    from pycuda.driver import CompileError

    source = with_defines(kernel_source(name), defines)
    started = time.perf_counter()
    try:
        cubin = compiler.compile(source, options=list(NVCC_OPTIONS), no_extern_c=True, arch=arch,
                                 include_dirs=[str(data_dir("cuda"))])
    except CompileError as exc:
        output = "\n".join(part for part in (exc.stdout, exc.stderr) if part) or str(exc)
        raise KernelCompileError(f"nvcc failed to compile {label} for {arch}:\n{output.strip()}") from None
    log.info("compiled %s for %s in %.2f s (or loaded from the cache)", label, arch,
             time.perf_counter() - started)
    return cubin


def compile_kernel(name: str, defines: Mapping[str, object], arch: str) -> bytes:
    """Compile ``cuda/<name>.cu`` with ``defines`` for ``arch`` (e.g. ``sm_90``); memoized.

    Raises:
        KernelCompileError: nvcc rejected it; the message carries nvcc's output.
        BackendUnavailableError: no nvcc on the PATH, or the source is missing.
    """
    return _compile_cached(name, tuple(sorted(defines.items())), arch)


def load_module(name: str, defines: Mapping[str, object], arch: str):
    """A new PyCUDA module instance of a specialisation, in the current CUDA context."""
    import pycuda.driver as driver  # optional (the cuda extra)

    return driver.module_from_buffer(compile_kernel(name, defines, arch))


def precompile(specialisations: list[tuple[str, Mapping[str, object]]], arch: str, *,
               workers: int = 8) -> None:
    """Compile many (kernel file, defines) specialisations in parallel (nvcc runs as separate
    processes), filling the caches."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda item: compile_kernel(item[0], item[1], arch), specialisations))
