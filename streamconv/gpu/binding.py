"""The seam between streamconv and its CUDA binding: what GPU code asks, and which binding answers.

Backends, nn, interop and the NVDEC source reach CUDA only through a :class:`Binding`: devices
and their primary contexts, streams, events, device / pitched / page-locked memory, copies (2-D
ones prepared once), modules loaded from cubins and fatbins with their constant memory, and
kernel launches whose arguments are packed once (:meth:`Kernel.bind`). Two implement it:

- ``cuda-core`` (:mod:`.cuda_core_binding`): NVIDIA's cuda-bindings (the driver API) beside
  cuda-core; wheels for every platform the project supports, the ``cuda`` extra, the default;
- ``pycuda`` (:mod:`.pycuda_binding`): PyCUDA, built from source (the ``pycuda`` extra).

``STREAMCONV_BINDING`` or :func:`select` chooses, once per process. NVRTC, DLPack and the calls
on other libraries' raw handles (:mod:`.handles`) use cuda-bindings and cuda-core whichever
binding runs: PyCUDA has no NVRTC and shows neither event handles nor pointer attributes.

Every call below needs the binding's context current (:meth:`Context.push`) unless it says not.
Addresses are ints; host arrays are NumPy arrays.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ..errors import BackendUnavailableError

BINDINGS = {"cuda-core": "cuda_core_binding", "pycuda": "pycuda_binding"}
"""Binding names (``STREAMCONV_BINDING``'s values) -> their module in this package."""
DEFAULT = "cuda-core"
VARIABLE = "STREAMCONV_BINDING"
"""The environment variable that chooses the binding."""
INSTALL = {"cuda-core": 'pip install "streamconv[cuda]"', "pycuda": "streamconv install-cuda"}
"""The one command that installs each binding."""


class GpuCallError(RuntimeError):
    """A CUDA driver call failed; the message names the call and CUDA's error."""


class GpuMemoryError(GpuCallError):
    """Device or page-locked host memory ran out."""


class Device(Protocol):
    """One GPU; needs no context current."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]

    def attribute(self, name: str) -> int:
        """A ``CU_DEVICE_ATTRIBUTE_<name>`` value, e.g. ``attribute("MULTIPROCESSOR_COUNT")``."""

    def retain_primary_context(self) -> Context:
        """A retain of the device's primary context (released by :meth:`Context.release`)."""


class Context(Protocol):
    """A retained primary context: made current around each block of GPU work."""

    handle: int

    def push(self) -> None:
        """Make it the calling thread's current context."""

    def pop(self) -> None:
        """Undo the last :meth:`push` of this thread."""

    def release(self) -> None:
        """Let this retain go (the context lives on while others hold it)."""


class Stream(Protocol):
    """A CUDA stream of the context current at its making (``handle``: its CUstream)."""

    handle: int

    def synchronize(self) -> None:
        """Wait on the host for the work queued so far."""

    def wait_for_event(self, event: Event) -> None:
        """Queue a wait for ``event``'s recorded work (the host does not wait)."""


class Event(Protocol):
    """A CUDA event of this binding (for streams of this binding)."""

    def record(self, stream: Stream | None = None) -> None:
        """Record on ``stream`` (None: the legacy default stream)."""

    def synchronize(self) -> None:
        """Wait on the host for the recorded work."""

    def query(self) -> bool:
        """Whether the recorded work is done (no waiting)."""

    def time_since(self, start: Event) -> float:
        """Milliseconds from ``start`` to this event (both recorded and done, timing events)."""


class DeviceBuffer(Protocol):
    """Device memory: ``int(buffer)`` is its address; freed by :meth:`free` (any thread)."""

    def __int__(self) -> int: ...

    def free(self) -> None:
        """Free it now (idempotent)."""


class Copy2D(Protocol):
    """A 2-D copy of ``height`` rows of ``width_bytes`` between host arrays and pitched device
    memory, prepared once; its host ends can be pointed at other arrays of the same layout."""

    def set_src_host(self, array: np.ndarray) -> None:
        """Copy from host ``array`` (rows ``src_pitch`` bytes apart)."""

    def set_dst_host(self, array: np.ndarray) -> None:
        """Copy into host ``array`` (rows ``dst_pitch`` bytes apart)."""

    def set_dst_device(self, address: int, pitch: int) -> None:
        """Copy into device memory at ``address``, rows ``pitch`` bytes apart."""

    def __call__(self, stream: Stream | None = None) -> None:
        """Queue the copy on ``stream``; None: copy now, synchronously."""


class Launch(Protocol):
    """One kernel launch with its grid, block and arguments packed once."""

    def __call__(self, stream: Stream | None) -> None:
        """Queue the launch on ``stream`` (None: the legacy default stream)."""


class Kernel(Protocol):
    """A kernel of a loaded module with its argument signature: one character per argument,
    ``P`` a device address, ``i`` an int32, ``q`` an int64, ``Q`` a uint64; a bracketed run of
    8-byte ones, ``[PPP]``, is one argument, a struct of them passed by value (given as that
    many ints)."""

    def attribute(self, name: str) -> int:
        """``num_regs``, ``shared_size_bytes`` (static) or ``local_size_bytes`` (spills)."""

    def bind(self, grid: tuple[int, ...], block: tuple[int, ...], *args: int) -> Launch:
        """The launch on ``grid`` x ``block`` with ``args`` (ints), packed now for every call."""

    def launch(self, stream: Stream | None, grid: tuple[int, ...], block: tuple[int, ...],
               *args: int) -> None:
        """Queue one launch, packing ``args`` for it alone."""


_MEMBERS = frozenset("PqQ")  # what a by-value struct of a signature may hold: 8-byte values


def signature_slots(signature: str) -> tuple[str, tuple[int, ...]]:
    """A :class:`Kernel` signature's values and parameters: (one character per value, brackets
    dropped; the index of each parameter's first value). ``[PP]Pi`` -> (``PPPi``, (0, 2, 3)).

    Raises:
        ValueError: unbalanced or nested brackets, an empty struct, or a struct member that is
            not 8 bytes (``P``, ``q``, ``Q``).
    """
    values: list[str] = []
    starts: list[int] = []
    in_struct = False
    for char in signature:
        if char == "[":
            if in_struct:
                raise ValueError(f"nested brackets in kernel signature {signature!r}")
            in_struct = True
            starts.append(len(values))
        elif char == "]":
            if not in_struct or starts[-1] == len(values):
                raise ValueError(f"unbalanced or empty brackets in kernel signature {signature!r}")
            in_struct = False
        else:
            if in_struct and char not in _MEMBERS:
                raise ValueError(f"{char!r} in a struct of kernel signature {signature!r}: "
                                 "members are 8-byte values (P, q, Q)")
            if not in_struct:
                starts.append(len(values))
            values.append(char)
    if in_struct:
        raise ValueError(f"unbalanced brackets in kernel signature {signature!r}")
    return "".join(values), tuple(starts)


class BoundLaunches:
    """The launches of one kernel, each bound (:meth:`Kernel.bind`) at its first use: a frame loop
    that repeats its launches packs no arguments after its first frames.

    Args:
        kernel: the kernel. block: threads per block.
        limit: distinct (grid, arguments) kept; all are let go when it is reached (a caller's
            device frames at ever new addresses would otherwise pile up).
    """

    def __init__(self, kernel: "Kernel", block: tuple[int, ...], *, limit: int = 64) -> None:
        self.kernel, self.block, self.limit = kernel, block, limit
        self._bound: dict[tuple, Launch] = {}

    def __call__(self, stream: Stream | None, grid: tuple[int, ...], *args: int) -> None:
        """Queue the launch on ``grid`` with ``args`` on ``stream``."""
        key = (grid, args)
        launch = self._bound.get(key)
        if launch is None:
            if len(self._bound) >= self.limit:
                self._bound.clear()
            launch = self._bound[key] = self.kernel.bind(grid, self.block, *args)
        launch(stream)


class Module(Protocol):
    """A module instance in the context current at its loading (its own constant memory)."""

    def kernel(self, name: str, signature: str) -> Kernel:
        """The ``extern "C"`` kernel ``name`` taking ``signature`` (see :class:`Kernel`)."""

    def global_address(self, name: str) -> tuple[int, int]:
        """(device address, bytes) of the ``__constant__`` or ``__device__`` symbol ``name``."""


class Binding(Protocol):
    """A CUDA binding. ``errors``: what its calls raise when the driver fails (``memory_errors``:
    when memory runs out), to catch without naming the binding."""

    name: str
    errors: tuple[type[BaseException], ...]
    memory_errors: tuple[type[BaseException], ...]

    def describe(self) -> str:
        """Its packages and versions, e.g. ``cuda-core 1.2.2, cuda-bindings 13.5.0``."""

    def driver_version(self) -> int:
        """The driver's CUDA version (13000 for 13.0); no context needed."""

    def device_count(self) -> int:
        """GPUs the driver sees; no context needed."""

    def device(self, ordinal: int) -> Device:
        """GPU ``ordinal``; no context needed."""

    def current_context(self) -> int | None:
        """The calling thread's current context's handle, or None; no context needed."""

    def current_device(self) -> Device:
        """The device of the current context."""

    def synchronize(self) -> None:
        """Wait for all work of the current context."""

    def stream(self) -> Stream:
        """A new stream, ordered with the legacy default stream (a blocking stream)."""

    def event(self, *, timing: bool = True, blocking: bool = False) -> Event:
        """A new event: ``timing`` for :meth:`Event.time_since`; ``blocking``: waits sleep."""

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of the current device."""

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """``nbytes`` of device memory (contents undefined)."""

    def alloc_pitch(self, width_bytes: int, height: int) -> tuple[DeviceBuffer, int]:
        """A pitched block of ``height`` rows of ``width_bytes``: (buffer, row pitch in bytes,
        a multiple of 16 at least; the address 256-byte aligned)."""

    def alloc_host(self, shape: Sequence[int] | int, dtype: Any, *,
                   portable: bool = False) -> np.ndarray:
        """A C-contiguous page-locked host array (contents undefined); ``base.free()`` frees it.
        ``portable``: usable from every context."""

    def copy_htod(self, dst: int, src: np.ndarray, stream: Stream | None = None) -> None:
        """Host ``src`` (C-contiguous) -> device ``dst``; asynchronous on ``stream`` if given."""

    def copy_dtoh(self, dst: np.ndarray, src: int, stream: Stream | None = None) -> None:
        """Device ``src`` -> host ``dst`` (C-contiguous); asynchronous on ``stream`` if given."""

    def copy_dtod(self, dst: int, src: int, nbytes: int) -> None:
        """``nbytes`` from device ``src`` to device ``dst`` on the legacy default stream."""

    def memset_d8(self, dst: int, value: int, nbytes: int) -> None:
        """Set ``nbytes`` at device ``dst`` to the byte ``value`` (synchronously)."""

    def copy_2d(self, width_bytes: int, height: int, *, src_pitch: int, dst_pitch: int,
                src_device: int | None = None, dst_device: int | None = None) -> Copy2D:
        """A 2-D copy; a device end is given here, a host end set on the copy."""

    def load_module(self, image: bytes) -> Module:
        """Load a cubin or fatbin into the current context."""


_lock = threading.Lock()
_selected: str | None = None
_loaded: dict[str, Binding] = {}


def chosen_name() -> str:
    """The binding this process uses: :func:`select`'s, else ``STREAMCONV_BINDING``, else
    :data:`DEFAULT`.

    Raises:
        BackendUnavailableError: an unknown name.
    """
    name = _selected or os.environ.get(VARIABLE) or DEFAULT
    if name not in BINDINGS:
        raise BackendUnavailableError(f"{VARIABLE}={name!r}; known: {', '.join(BINDINGS)}")
    return name


def select(name: str) -> None:
    """Choose the binding (``cuda-core`` or ``pycuda``) for this process, before any GPU work.

    Raises:
        BackendUnavailableError: an unknown name, or another binding already in use.
    """
    global _selected
    if name not in BINDINGS:
        raise BackendUnavailableError(f"unknown CUDA binding {name!r}; "
                                      f"known: {', '.join(BINDINGS)}")
    with _lock:
        if _loaded and name not in _loaded:
            raise BackendUnavailableError(f"the {next(iter(_loaded))} binding is in use already; "
                                          "choose the binding before any GPU work")
        _selected = name


def binding() -> Binding:
    """The chosen binding, its driver initialized (loaded once per process).

    Raises:
        BackendUnavailableError: its packages are not installed (the message names the command
            that installs them), or the driver is missing or does not suit them.
    """
    name = chosen_name()
    found = _loaded.get(name)
    if found is not None:
        return found
    with _lock:
        if name not in _loaded:
            module = importlib.import_module(f".{BINDINGS[name]}", __package__)
            _loaded[name] = module.load()
        return _loaded[name]


def packages_missing(name: str, exc: ImportError) -> BackendUnavailableError:
    """The error for binding ``name`` whose import failed with ``exc``."""
    return BackendUnavailableError(f"{name} binding not installed ({exc.name or exc}; "
                                   f"fix: {INSTALL[name]})")


_CUDA_CORE_LOCK = threading.Lock()


def cuda_core() -> Any:
    """The ``cuda.core`` module (NVRTC, DLPack; about 0.3 s to import), its first import made by
    one thread at a time: cuda-core 1.2 copies its versioned submodule's globals (``__spec__``
    included) into its own as it starts, so a second thread importing it at once takes it for
    imported and misses names (NVRTC's Program, seen with parallel kernel compiles).

    Raises:
        BackendUnavailableError: cuda-core is not installed.
    """
    with _CUDA_CORE_LOCK:
        try:
            import cuda.core  # the cuda extra (the pycuda extra installs it too)
            import cuda.core.utils
        except ImportError as exc:
            raise BackendUnavailableError(f"cuda-core not installed ({exc}; fix: pip install "
                                          "\"streamconv[cuda]\")") from None
    return cuda.core
