"""Whether CUDA can run here, and the device layer beneath backends and nn: the CUDA binding
(:mod:`streamconv.gpu.binding`) with its driver, and the process's hold on each device's primary
context.

Both the CUDA backend (:mod:`streamconv.backends`) and the convolution layers (:mod:`streamconv.nn`)
ask this module, and it imports neither, so neither imports the other to learn whether a GPU is
usable. The binding is an optional dependency (the ``cuda`` extra): it is imported on first use,
never at import time.
"""

from __future__ import annotations

import functools
import threading
from typing import Sequence

from . import setup as cuda_setup, loader as kernel_loader, prebuilt
from ..errors import BackendUnavailableError, SettingsError
from .binding import Binding, Context, Device, binding

NO_DRIVER = "no NVIDIA driver (libcuda.so.1 does not load): the GPU backend needs one"
"""Why CUDA cannot run where the driver is missing: no install command helps then."""


@functools.lru_cache(maxsize=None)
def cuda_status(device: int = 0) -> tuple[bool, str]:
    """Whether CUDA work can run here on ``device``, and a one-line reason or device description.

    Creates no CUDA context: it only initializes the driver and queries the device.
    """
    if cuda_setup.find_driver() is None:
        return False, NO_DRIVER
    try:
        gpu = binding()
        count = gpu.device_count()
    except BackendUnavailableError as exc:
        return False, str(exc)
    except Exception as exc:  # a broken install raises odd things; report, don't crash
        return False, f"no usable NVIDIA driver ({exc})"
    if count == 0:
        return False, "no NVIDIA GPU found"
    if not 0 <= device < count:
        return False, f"device {device} requested, {count} GPU(s) present (0..{count - 1})"
    found = gpu.device(device)
    major, minor = found.compute_capability
    version = gpu.driver_version()
    described = (f"{found.name} (device {device}, sm_{major}{minor}, "
                 f"driver CUDA {version // 1000}.{version % 1000 // 10}, {gpu.name} binding)")
    kernels = kernel_supply(f"sm_{major}{minor}")
    if kernels is None:
        return False, f"{described}: no kernels for it: {kernel_loader.missing_compiler_hint()}"
    return True, f"{described}; kernels {kernels}"


def kernel_supply(arch: str) -> str | None:
    """Where this GPU's kernels come from, e.g. ``prebuilt (212), else NVRTC 13.0``, or None when
    nothing is prebuilt for ``arch`` and no compiler is usable."""
    index = prebuilt.read_index() if kernel_loader.prebuilt_enabled() else None
    covered = 0 if index is None else index.count_for(arch, kernel_loader.driver_cuda_major())
    compiler = kernel_loader.chosen_compiler()
    found = kernel_loader.usable_compiler(compiler)
    compiling = None if found is None else kernel_loader.compiler_label(found)
    if covered and compiling:
        return f"prebuilt ({covered}), else {compiling}"
    if covered:
        hint = kernel_loader.missing_compiler_hint(compiler)
        return f"prebuilt only ({covered}; others cannot compile: {hint})"
    return f"compiled by {compiling}" if compiling else None


def cuda_device_count() -> int:
    """GPUs the driver sees (0 without the binding or a driver)."""
    if cuda_setup.find_driver() is None:
        return 0
    try:
        return binding().device_count()
    except Exception:  # no binding, a broken driver: no GPU to count
        return 0


def gpu_numbers(devices: Sequence[int] | str | None) -> list[int]:
    """The GPU numbers of a ``devices`` option: None -> [0]; "all" -> every GPU present (at least
    [0]); a list as given (each checked when used).

    Raises:
        SettingsError: no list, or the numbers are not distinct numbers >= 0.
    """
    if devices is None:
        return [0]
    if devices == "all":
        return list(range(max(1, cuda_device_count())))
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):  # "01": digits
        raise SettingsError(f"devices must be a list of GPU numbers or 'all', got {devices!r}")
    chosen = [int(d) for d in devices]
    if not chosen or any(d < 0 for d in chosen) or len(set(chosen)) != len(chosen):
        raise SettingsError(f"devices must be distinct GPU numbers >= 0, got {devices!r}")
    return chosen


def load_binding(user: str) -> Binding:
    """The CUDA binding, its driver initialized.

    Args:
        user: who needs it, for the message, e.g. ``"streamconv.nn on the GPU"``.

    Raises:
        BackendUnavailableError: no driver, or the binding is not installed (the message names
            the command that installs it) or does not start.
    """
    if cuda_setup.find_driver() is None:
        raise BackendUnavailableError(f"{user}: {NO_DRIVER}")
    try:
        return binding()
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(f"{user}: {exc}") from None


# One extra retain of each device's primary context, held for the process: creating and
# destroying a context costs about 0.1 s each (H200), which every pipeline would otherwise pay
# twice. A backend that met a GPU fault lets it go, so the next one starts on a fresh context.
_KEPT_CONTEXTS: dict[int, Context] = {}
_KEPT_LOCK = threading.Lock()


def keep_primary_context(device: Device, number: int) -> None:
    """Hold a retain of ``device``'s primary context (ordinal ``number``) for the process."""
    with _KEPT_LOCK:
        if number not in _KEPT_CONTEXTS:
            _KEPT_CONTEXTS[number] = device.retain_primary_context()


def release_kept_context(number: int) -> None:
    """Let the process's hold on device ``number``'s primary context go (after a GPU fault)."""
    with _KEPT_LOCK:
        context = _KEPT_CONTEXTS.pop(number, None)
    if context is not None:
        context.release()
