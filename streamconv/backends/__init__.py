"""Compute backends: ``cpu`` (the NumPy/OpenCV reference) and ``cuda`` (PyCUDA).

Every backend offers the same slot protocol the pipeline drives:
``allocate_slots(shape, count, planes=None)``, ``submit(slot)``, ``is_done(slot)``, ``wait(slot)``,
``close()``, plus ``apply(src)`` / ``apply_into(dst, src)`` for single frames.
"""

from __future__ import annotations

import functools
import logging
import shutil
from typing import Sequence

from ..borders import DEFAULT_BORDER
from ..errors import BackendUnavailableError, FilterSpecError
from ..filters import FilterStage

log = logging.getLogger(__name__)

BACKENDS = ("auto", "cpu", "cuda")


@functools.lru_cache(maxsize=None)
def cuda_status(device: int = 0) -> tuple[bool, str]:
    """Whether the CUDA backend can run here, and a one-line reason or device description.

    Creates no CUDA context: it only initializes the driver and queries the device.
    """
    try:
        import pycuda.driver as driver
    except ImportError:
        return False, "pycuda not installed (pip install 'streamconv[cuda]')"
    except Exception as exc:  # a broken install raises odd things; report, don't crash
        return False, f"pycuda failed to import: {exc}"
    try:
        driver.init()
        count = driver.Device.count()
    except Exception as exc:
        return False, f"no usable NVIDIA driver ({exc})"
    if count == 0:
        return False, "no NVIDIA GPU found"
    if not 0 <= device < count:
        return False, f"device {device} requested, {count} GPU(s) present (0..{count - 1})"
    if shutil.which("nvcc") is None:
        return False, "nvcc not found on PATH (the CUDA toolkit compiles the kernels)"
    gpu = driver.Device(device)
    major, minor = gpu.compute_capability()
    version = driver.get_driver_version()
    return True, f"{gpu.name()} (device {device}, sm_{major}{minor}, driver CUDA {version // 1000}.{version % 1000 // 10})"


def resolve_backend(name: str, *, device: int = 0) -> str:
    """Turn ``auto`` into ``cuda`` or ``cpu`` (with a one-line notice); check ``cuda`` is usable.

    Raises:
        BackendUnavailableError: ``cuda`` requested but unusable; the message says why.
        FilterSpecError: an unknown backend name.
    """
    if name not in BACKENDS:
        raise FilterSpecError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    if name == "cpu":
        return "cpu"
    usable, reason = cuda_status(device)
    if usable:
        return "cuda"
    if name == "cuda":
        raise BackendUnavailableError(f"cuda backend unavailable: {reason}")
    log.warning("cuda unavailable: %s; using the cpu backend", reason)
    return "cpu"


def check_kernel_choice(kernel: str, filters: Sequence[FilterStage], backend: str) -> None:
    """Refuse an unknown ``--kernel`` or one that cannot run a stage, before any work; on the
    cpu backend, a kernel other than ``auto`` is ignored with a notice.

    Raises:
        FilterSpecError: unknown kernel, or ``separable`` for taps that are not rank 1.
    """
    from . import variants

    variants.check_kernel(kernel)
    if backend == "cuda":
        for stage in filters:
            if stage.layer is None:  # a bank runs streamconv.nn's kernels, whatever --kernel says
                variants.choose_variant(stage, kernel)
    elif kernel != variants.AUTO:
        log.warning("--kernel %s applies to the cuda backend; the cpu backend ignores it", kernel)


def create_backend(name: str, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                   device: int = 0, kernel: str = "auto", **cuda_options):
    """Create a backend for a filter chain, in the calling thread (CUDA contexts are per thread).

    ``kernel`` (``auto`` or a variant name, see :mod:`streamconv.backends.variants`) and
    ``cuda_options`` (``pinned``, ``blocking_sync``) go to the CUDA backend only.
    """
    resolved = resolve_backend(name, device=device)
    if resolved == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(filters, border=border, device=device, kernel=kernel, **cuda_options)
    from .cpu import CpuBackend

    return CpuBackend(filters, border=border)
