"""The one place CUDA kernels come from: prebuilt with the wheel, or compiled here, memoized.

A *specialisation* is a kernel file plus sorted ``#define``s, e.g.
``conv2d[BANKS=1,BORDER=reflect101,CHANNELS=3,RADIUS=2]``. Each is found, in this order:

1. prebuilt: a fatbin the wheel carries (:mod:`streamconv.gpu.prebuilt`), which the driver loads
   with no compiler installed;
2. compiled by NVRTC (:mod:`streamconv.gpu.nvrtc`, a wheel), its cubin kept in the per-user cache
   (:mod:`streamconv.gpu.cache`);
3. compiled by nvcc, a CUDA toolkit's, its cubin kept in the same cache.

``STREAMCONV_PREBUILT=0`` skips the first; ``STREAMCONV_COMPILER=nvrtc|nvcc|none`` picks the
compiler (default: NVRTC where found, else nvcc). Each specialisation is resolved once per process
and GPU architecture. A module instance is loaded per filter stage, because each stage holds its
own taps in the module's ``__constant__`` memory.

The CUDA backend and :mod:`streamconv.nn` both load their kernels here; it sits beneath
both (it imports neither), so that nn imports no module of backends.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import setup as cuda_setup, cache as kernel_cache, nvrtc, prebuilt
from ..frames.borders import BORDER_CODES
from ..errors import BackendUnavailableError, KernelCompileError
from .binding import Binding, Module
from ..files.resources import data_dir

log = logging.getLogger(__name__)

NVCC_OPTIONS = ("-O3", "-std=c++17")
COMPILERS = ("auto", "nvrtc", "nvcc", "none")
"""The values of ``STREAMCONV_COMPILER``."""

@functools.lru_cache(maxsize=1)
def kernel_paths() -> dict[str, Path]:
    """Kernel file stem -> its ``cuda/<owner>/<stem>.cu`` in this installation (never the
    working directory): the folders name the family or package that runs the kernels, the
    headers they share sit in ``cuda/`` itself (the include path). Listed once per process.

    Raises:
        BackendUnavailableError: two folders hold a kernel file of the same stem.
    """
    found: dict[str, Path] = {}
    for path in sorted(data_dir("cuda").glob("*/*.cu")):
        if path.stem in found:
            raise BackendUnavailableError(f"two CUDA kernel files named {path.name}: "
                                          f"{found[path.stem]} and {path}")
        found[path.stem] = path
    return found


@functools.lru_cache(maxsize=None)
def kernel_source(name: str) -> str:
    """The text of the kernel file ``name`` (a stem, e.g. ``conv2d``) from this installation
    (:func:`kernel_paths`); read once per process."""
    path = kernel_paths().get(name)
    if path is None:
        raise BackendUnavailableError("CUDA kernel source missing from the installation: "
                                      f"{data_dir('cuda')}/*/{name}.cu")
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


@dataclass(frozen=True)
class KernelImage:
    """A specialisation's loadable code.

    Attributes:
        data: a fatbin or cubin, for ``cuModuleLoadData`` (host bytes).
        origin: ``"prebuilt"``, ``"nvrtc"`` (compiled or read from the cache) or ``"nvcc"``.
    """

    data: bytes
    origin: str


_origins: dict[str, str] = {}
_origins_lock = threading.Lock()


def origins() -> dict[str, str]:
    """Each specialisation this process loaded (its log label, with the arch) -> where its code
    came from (``prebuilt``, ``nvrtc``, ``nvcc``)."""
    with _origins_lock:
        return dict(_origins)


def chosen_compiler() -> str:
    """``STREAMCONV_COMPILER`` (``auto`` when unset).

    Raises:
        BackendUnavailableError: an unknown value.
    """
    value = os.environ.get("STREAMCONV_COMPILER", "auto") or "auto"
    if value not in COMPILERS:
        raise BackendUnavailableError(f"STREAMCONV_COMPILER={value!r}; known: "
                                      f"{', '.join(COMPILERS)}")
    return value


def prebuilt_enabled() -> bool:
    """Whether prebuilt kernels are used (``STREAMCONV_PREBUILT`` is not ``0``)."""
    return os.environ.get("STREAMCONV_PREBUILT", "1") != "0"


def driver_cuda_major() -> int | None:
    """The CUDA major version of the installed driver (13 for 580), or None without a driver:
    NVRTC must not be newer than it."""
    driver = cuda_setup.find_driver()
    return None if driver is None else driver.major


def find_nvrtc() -> "nvrtc.Nvrtc | None":
    """The NVRTC this process compiles with (None where none matches the driver)."""
    return nvrtc.find(driver_cuda_major())


def usable_compiler(compiler: str = "auto") -> "nvrtc.Nvrtc | str | None":
    """What ``compiler`` (a ``STREAMCONV_COMPILER`` value) compiles with here: the NVRTC found,
    ``"nvcc"``, or None (nothing usable). ``auto`` prefers NVRTC."""
    found = find_nvrtc() if compiler in ("auto", "nvrtc") else None
    if found is not None:
        return found
    return "nvcc" if compiler in ("auto", "nvcc") and shutil.which("nvcc") is not None else None


def compiler_label(found: "nvrtc.Nvrtc | str") -> str:
    """``NVRTC 13.0`` or ``nvcc``, for :func:`usable_compiler`'s result."""
    return found if isinstance(found, str) else found.label


@functools.lru_cache(maxsize=None)
def _image_cached(name: str, define_items: tuple[tuple[str, object], ...], arch: str,
                  use_prebuilt: bool, compiler: str) -> KernelImage:
    defines = dict(define_items)
    text = with_defines(kernel_source(name), defines)
    if use_prebuilt:
        fatbin = prebuilt.lookup(name, text, arch, driver_cuda_major())
        if fatbin is not None:
            return KernelImage(fatbin, "prebuilt")
    return compile_image(name, defines, arch, compiler)


def compile_image(name: str, defines: Mapping[str, object], arch: str,
                  compiler: str = "auto") -> KernelImage:
    """Compile a specialisation for ``arch`` with ``compiler`` (``auto``: NVRTC where found,
    else nvcc), not looking at the prebuilt kernels.

    Raises:
        KernelCompileError: the compiler rejected it; the message carries its output.
        BackendUnavailableError: no compiler (the message names the command that installs one),
            or the source is missing.
    """
    label = specialisation_name(name, defines)
    text = with_defines(kernel_source(name), defines)
    started = time.perf_counter()
    found = usable_compiler(compiler)
    if found is None:
        raise BackendUnavailableError(f"no compiler for {label} on {arch}: "
                                      f"{missing_compiler_hint(compiler)}")
    key = prebuilt.source_key(name, text)
    if found == "nvcc":
        origin, tag = "nvcc", f"nvcc{_nvcc_version()}"
    else:
        origin, tag = "nvrtc", f"nvrtc{found.version[0]}.{found.version[1]}"
    cubin = kernel_cache.read(key, arch, tag)
    if cubin is None:
        cubin = (_nvcc(text, label, arch) if found == "nvcc"
                 else nvrtc.compile_cubin(found, text, label, arch, str(data_dir("cuda"))))
        kernel_cache.write(key, arch, tag, cubin)
    log.info("%s for %s from %s in %.2f s", label, arch, origin, time.perf_counter() - started)
    return KernelImage(cubin, origin)


def missing_compiler_hint(compiler: str = "auto") -> str:
    """Why no compiler is usable, and the one command that installs one."""
    if compiler == "none":
        return "STREAMCONV_COMPILER=none forbids compiling"
    major = driver_cuda_major()
    command = nvrtc.INSTALL_HINT.get(major or 13, nvrtc.INSTALL_HINT[13])
    if compiler == "nvcc":
        return "STREAMCONV_COMPILER=nvcc, and nvcc is not on PATH"
    return f"neither NVRTC nor nvcc was found; `{command}` installs NVRTC"


@functools.lru_cache(maxsize=1)
def _nvcc_version() -> str:
    """nvcc's release, e.g. ``13.0`` (it names the cache's entries), or ``unknown``."""
    done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"release (\d+\.\d+)", done.stdout)
    return found.group(1) if found else "unknown"


def _nvcc(text: str, label: str, arch: str) -> bytes:
    """A cubin of ``text`` for ``arch`` compiled by nvcc, in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="streamconv-nvcc-") as scratch:
        source, cubin = Path(scratch) / "kernel.cu", Path(scratch) / "kernel.cubin"
        source.write_text(text, encoding="utf-8")
        done = subprocess.run(["nvcc", "--cubin", f"-arch={arch}", *NVCC_OPTIONS,
                               f"-I{data_dir('cuda')}", "-o", str(cubin), str(source)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = "\n".join(part for part in (done.stdout, done.stderr) if part.strip())
            raise KernelCompileError(f"nvcc failed to compile {label} for {arch}:\n"
                                     f"{output.strip()}")
        return cubin.read_bytes()


def kernel_image(name: str, defines: Mapping[str, object], arch: str) -> KernelImage:
    """The code of kernel file ``name`` with ``defines`` for ``arch`` (e.g. ``sm_90``): prebuilt
    if the wheel carries it, else compiled; memoized.

    Raises:
        KernelCompileError: the compiler rejected it; the message carries its output.
        BackendUnavailableError: nothing prebuilt and no compiler, or the source is missing.
    """
    return _image_cached(name, tuple(sorted(defines.items())), arch, prebuilt_enabled(),
                         chosen_compiler())


def compile_kernel(name: str, defines: Mapping[str, object], arch: str) -> bytes:
    """The bytes of :func:`kernel_image` (a fatbin or a cubin)."""
    return kernel_image(name, defines, arch).data


def load_module(name: str, defines: Mapping[str, object], arch: str, gpu: Binding) -> Module:
    """A new module instance of a specialisation, loaded by ``gpu`` into its current context.

    A prebuilt fatbin the driver refuses (a driver older than the CUDA that built it) is
    logged and the specialisation compiled instead.
    """
    image = kernel_image(name, defines, arch)
    label = f"{specialisation_name(name, defines)} {arch}"
    try:
        module = gpu.load_module(image.data)
    except gpu.errors as exc:
        if image.origin != "prebuilt":
            raise
        log.warning("the driver refused the prebuilt %s (%s); compiling it", label, exc)
        image = compile_image(name, defines, arch, chosen_compiler())
        module = gpu.load_module(image.data)
    with _origins_lock:
        _origins[label] = image.origin
    return module


def precompile(specialisations: list[tuple[str, Mapping[str, object]]], arch: str, *,
               workers: int = 8) -> None:
    """Compile many (kernel file, defines) specialisations in parallel (nvcc runs as separate
    processes), filling the caches."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda item: compile_kernel(item[0], item[1], arch), specialisations))
