"""Compute backends: ``cpu`` (the NumPy/OpenCV reference) and ``cuda`` (:mod:`streamconv.gpu`).

Every backend implements the slot protocol of :class:`streamconv.backends.protocol.Backend`;
:mod:`streamconv.backends.plan` chooses the CUDA backend's kernels, once per chain.

Also here: :mod:`.catalogue` (the specialisations a wheel carries prebuilt: what ``auto`` picks for
the usual filters); :mod:`.families`/ (the kernel families, one module each beside its .cu file(s));
:mod:`.prebuild` (``python -m streamconv.prebuild``: compile the catalogue's kernels into);
:mod:`.temporal_chain` (a chain with stages across frames).
"""

from __future__ import annotations

import logging
from typing import Sequence

from ..frames.borders import DEFAULT_BORDER
from ..gpu.device import cuda_status
from ..errors import BackendUnavailableError, SettingsError
from ..chain.filters import FilterStage
from .cpu.backend import CPU_SEPARABLE, CpuBackend
from .cuda.backend import CudaBackend
from .plan import AUTO, ChainPlan, check_kernel, plan_chain
from .protocol import Backend
from .cpu.temporal import TemporalCpuBackend
from .cuda.temporal import TemporalCudaBackend

log = logging.getLogger(__name__)

BACKENDS = ("auto", "cpu", "cuda")


_NOTICED: set[str] = set()  # the reasons auto has already given for choosing the cpu backend


def resolve_backend(name: str, *, device: int = 0) -> str:
    """Turn ``auto`` into ``cuda`` or ``cpu`` (with a one-line notice); check ``cuda`` is usable.

    Raises:
        BackendUnavailableError: ``cuda`` requested but unusable; the message says why.
        SettingsError: an unknown backend name.
    """
    if name not in BACKENDS:
        raise SettingsError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    if name == "cpu":
        return "cpu"
    usable, reason = cuda_status(device)
    if usable:
        return "cuda"
    if name == "cuda":
        raise BackendUnavailableError(f"cuda backend unavailable: {reason}")
    if reason not in _NOTICED:  # once per process: a program making many Filters hears it once
        _NOTICED.add(reason)
        log.warning("cuda unavailable: %s; using the cpu backend", reason)
    return "cpu"


def plan_kernels(kernel: str, filters: Sequence[FilterStage], backend: str) -> ChainPlan | None:
    """The chain's kernel plan for ``backend``, made once, before any work: the CUDA backend
    runs it; the cpu backend (None) takes ``auto`` and ``separable`` (checked here, see
    :class:`CpuBackend`) and ignores other kernels with a notice.

    Raises:
        SettingsError: an unknown kernel.
        FilterSpecError: a kernel that cannot run a stage (``separable`` for taps that are not
            rank 1, ``tensor-core`` above K = 9).
    """
    check_kernel(kernel)
    if backend == "cuda":
        return plan_chain(filters, kernel)
    if kernel == CPU_SEPARABLE:
        CpuBackend(filters, kernel=kernel)  # refuses taps that are not rank 1
    elif kernel != AUTO:
        log.warning("--kernel %s applies to the cuda backend; the cpu backend ignores it", kernel)
    return None


def create_backend(name: str, filters: Sequence[FilterStage], *, border: str = DEFAULT_BORDER,
                   device: int = 0, kernel: str = "auto", plan: ChainPlan | None = None,
                   **cuda_options) -> Backend:
    """Create a backend for a filter chain, in the calling thread (CUDA contexts are per thread).

    ``kernel`` (``auto`` or a variant name, see :mod:`streamconv.backends.plan`; the cpu backend
    takes ``separable`` too), ``plan`` (the chain's plan from :func:`plan_kernels`, made anew if
    None) and ``cuda_options`` (``pinned``, ``blocking_sync``) go to the CUDA backend only.
    """
    resolved = resolve_backend(name, device=device)
    temporal = any(stage.temporal is not None for stage in filters)
    if resolved == "cuda":
        cuda_class = TemporalCudaBackend if temporal else CudaBackend
        return cuda_class(filters, border=border, device=device, kernel=kernel, plan=plan,
                          **cuda_options)
    cpu_class = TemporalCpuBackend if temporal else CpuBackend
    return cpu_class(filters, border=border, kernel=kernel)
