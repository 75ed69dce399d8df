"""The driver as ``libcuda.so.1`` reports it, and PyCUDA's route: built against headers from wheels.

The default binding needs none of this (``pip install "streamconv[cuda]"``: wheels only). PyPI has
PyCUDA as source only, and its build looks for a CUDA toolkit through ``nvcc``. It needs much less:
``cuda.h`` and ``cudaProfiler.h`` (NVIDIA's ``nvidia-cuda-runtime`` and
``nvidia-cuda-profiler-api`` wheels carry them), the driver's ``libcuda.so.1`` to link against,
and a C++ compiler with the Python headers. :func:`install` installs those wheels, NVRTC and
cuda-bindings / cuda-core (which PyCUDA's route uses for NVRTC, DLPack and other libraries'
handles) at the driver's CUDA version, writes PyCUDA's own configuration file (``siteconf.py``)
into its unpacked source to point it at them, and builds it, all with this interpreter's pip.

The driver is probed through ctypes (:func:`find_driver`): one call, which works where no binding
is installed yet, so that ``info`` and the fallback notices can tell "no driver" from "no binding".
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

PYCUDA_REQUIREMENT = "pycuda>=2024.1"


@dataclass(frozen=True)
class Driver:
    """The NVIDIA driver as ``libcuda.so.1`` reports it.

    Attributes:
        version: CUDA version as the driver API gives it (13000 for 13.0).
        path: the library's file.
    """

    version: int
    path: str

    @property
    def major(self) -> int:
        return self.version // 1000

    @property
    def minor(self) -> int:
        return self.version % 1000 // 10

    def describe(self) -> str:
        """E.g. ``CUDA 13.0 (/usr/lib/x86_64-linux-gnu/libcuda.so.1)``."""
        return f"CUDA {self.major}.{self.minor} ({self.path})"


@functools.lru_cache(maxsize=None)
def find_driver() -> Driver | None:
    """The driver library loaded by its soname, or None where there is none (no binding needed);
    looked up once per process."""
    try:
        library = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int()
    if library.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return Driver(version.value, _loaded_path("libcuda.so") or "libcuda.so.1")


def _loaded_path(stem: str) -> str | None:
    """Where this process mapped a library whose file name starts with ``stem``."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None


BINDING_REQUIREMENTS = {13: ["cuda-core>=1.2,<2", "cuda-bindings>=13,<14"],
                        12: ["cuda-core>=1.2,<2", "cuda-bindings>=12.9,<13"]}
"""The default binding's packages for a driver of each CUDA major (the cuda, cuda12 extras)."""


def wheel_requirements(driver: Driver) -> list[str]:
    """The NVIDIA wheels for this driver: headers of its own CUDA version, NVRTC and
    cuda-bindings / cuda-core of its major."""
    version = f"{driver.major}.{driver.minor}.*"
    if driver.major >= 13:
        return [f"nvidia-cuda-runtime=={version}", f"nvidia-cuda-profiler-api=={version}",
                f"nvidia-cuda-nvrtc=={driver.major}.*", *BINDING_REQUIREMENTS[13]]
    return [f"nvidia-cuda-runtime-cu12=={version}", f"nvidia-cuda-profiler-api-cu12=={version}",
            "nvidia-cuda-nvrtc-cu12==12.*", *BINDING_REQUIREMENTS[12]]


def header_dirs(roots: Sequence[str] | None = None) -> list[str]:
    """The include folders of the installed NVIDIA wheels that hold ``cuda.h`` and
    ``cudaProfiler.h``
    (one folder for CUDA 13's layout, two for CUDA 12's), searched under ``roots`` (default: the
    folders of ``sys.path``, so wheels a virtual environment sees from the system count too)."""
    roots = roots or [entry for entry in dict.fromkeys(sys.path) if entry and os.path.isdir(entry)]
    found = []
    for header in ("cuda.h", "cudaProfiler.h"):
        for root in roots:
            matches = sorted(glob.glob(os.path.join(root, "nvidia", "*", "include", header)))
            if matches:
                folder = os.path.dirname(matches[-1])
                if folder not in found:
                    found.append(folder)
                break
        else:
            raise FileNotFoundError(f"{header} not found in the NVIDIA wheels under "
                                    f"{', '.join(roots)}")
    return found


def siteconf(include_dirs: Sequence[str], link_dir: str) -> str:
    """PyCUDA's ``siteconf.py``: headers from the wheels, the driver to link, no toolkit parts
    (CURAND is a toolkit library and OpenGL interop is not used)."""
    return (f"CUDA_ROOT = None\nCUDA_INC_DIR = {list(include_dirs)!r}\n"
            f"CUDADRV_LIB_DIR = [{link_dir!r}]\nCUDADRV_LIBNAME = ['cuda']\n"
            "CUDA_ENABLE_CURAND = False\nCUDA_ENABLE_GL = False\nUSE_SHIPPED_BOOST = True\n"
            "CXXFLAGS = []\nLDFLAGS = []\n")


def install(pip_args: Sequence[str] = (), *, say: Callable[[str], None] = print,
            run: Callable[[list[str]], None] | None = None) -> None:
    """Install NVRTC, cuda-bindings and cuda-core, the headers and PyCUDA (built from its source
    alone: its build needs take wheels) into this interpreter's environment.

    Args:
        pip_args: further pip options for every step (``--no-index --find-links DIR`` offline,
            ``--no-build-isolation`` where build tools cannot be downloaded).
        say: where progress lines go.
        run: runs one command, raising on failure (default: subprocess, output shown).

    Raises:
        RuntimeError: no driver, a step failed, or the headers were not where the wheels put them.
    """
    run = run or _run
    driver = find_driver()
    if driver is None:
        raise RuntimeError("no NVIDIA driver found (libcuda.so.1 does not load); install the "
                           "driver first")
    say(f"driver: {driver.describe()}")
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "install", *wheel_requirements(driver), *pip_args])
    includes = header_dirs()
    with tempfile.TemporaryDirectory(prefix="streamconv-pycuda-") as scratch:
        link_dir = os.path.join(scratch, "lib")
        os.makedirs(link_dir)
        # the linker wants the unversioned name, which driver-only installs often lack
        os.symlink(driver.path, os.path.join(link_dir, "libcuda.so"))
        # pycuda alone from source: ":all:" would make pip build its build needs (numpy...) too
        run([*pip, "download", "--no-deps", "--no-binary", "pycuda", PYCUDA_REQUIREMENT,
             "-d", scratch, *pip_args])
        source = _unpack(scratch)
        (source / "siteconf.py").write_text(siteconf(includes, link_dir), encoding="utf-8")
        with open(source / "setup.cfg", "a", encoding="utf-8") as config:  # compile on every core
            config.write(f"\n[build_ext]\nparallel = {os.cpu_count() or 1}\n")
        say(f"building PyCUDA against {', '.join(includes)} and {driver.path}")
        run([*pip, "install", "--no-cache-dir", str(source), *pip_args])
    say("done: STREAMCONV_BINDING=pycuda chooses PyCUDA; `streamconv info` shows what runs")


def _unpack(folder: str) -> Path:
    archives = glob.glob(os.path.join(folder, "pycuda-*.tar.gz"))
    if not archives:
        raise RuntimeError(f"pip did not download PyCUDA's source into {folder}")
    with tarfile.open(archives[0]) as archive:
        if hasattr(tarfile, "data_filter"):  # 3.12+, and security releases of older Pythons
            archive.extractall(folder, filter="data")
        else:
            archive.extractall(folder)  # noqa: S202 - PyPI's own sdist
    (source,) = (path for path in Path(folder).glob("pycuda-*") if path.is_dir())
    return source


def _run(command: list[str]) -> None:
    print("+ " + " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        raise RuntimeError(f"this step failed: {' '.join(command)}")
