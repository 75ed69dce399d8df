"""Frame checks shared by sources, sinks and backends."""

from __future__ import annotations

import math
import operator
import os
from fractions import Fraction
from typing import Any

import numpy as np

from .arguments import check_number
from ..errors import FrameFormatError, FrameTypeError, InputError, SettingsError, StreamconvError
from ..files.tapfiles import MAX_SIZE, show_value

CHANNEL_COUNTS = (1, 3, 4)

FRAME_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
"""Sample types a frame may have: 8 bits (saturating at 255) or 16 bits (saturating at 65535)."""


def sample_maximum(dtype: np.dtype) -> int:
    """The largest sample of a frame dtype: 255 for uint8, 65535 for uint16."""
    return int(np.iinfo(dtype).max)


def as_hwc(frame: object, *, what: str = "frame") -> np.ndarray:
    """View an (H, W) or (H, W, C) uint8 or uint16 host array as (H, W, C) with C in 1, 3, 4
    (no copy).

    Raises:
        FrameTypeError: not a NumPy array, or neither uint8 nor uint16.
        FrameFormatError: wrong number of dimensions, channels, or an empty frame.
    """
    if not isinstance(frame, np.ndarray):
        raise FrameTypeError(f"{what}: expected a numpy.ndarray, got {type(frame).__name__}")
    if frame.dtype not in FRAME_DTYPES:
        raise FrameTypeError(f"unexpected {what} dtype: {frame.dtype} != uint8 or uint16")
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3 or frame.shape[2] not in CHANNEL_COUNTS:
        raise FrameFormatError(
            f"unexpected {what} shape: {frame.shape} != (H, W), (H, W, 3) or (H, W, 4)"
        )
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise FrameFormatError(f"empty {what}: shape {frame.shape}")
    return frame


def as_frame_type(shape: Any, dtype: Any,
                  what: str = "frame") -> tuple[tuple[int, int, int], np.dtype]:
    """The (H, W, C) shape and NumPy dtype of a frame to be made, from a ``shape`` of (H, W) or
    (H, W, C) positive integers and a ``dtype`` (uint8 or uint16, by any name NumPy takes),
    checked as :func:`as_hwc` checks a frame, before anything is allocated.

    Raises:
        FrameFormatError: ``shape`` not a tuple of integers >= 1, or not a frame's shape.
        FrameTypeError: ``dtype`` no NumPy dtype, or neither uint8 nor uint16.
    """
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise FrameFormatError(f"{what} shape must be a tuple such as (H, W, 3), got "
                               f"{show_value(shape)}")
    sizes = tuple(as_count(size, f"{what} shape {show_value(shape)}: each size", 1,
                           error=FrameFormatError) for size in shape)
    try:
        sample = np.dtype(dtype)
    except TypeError:
        raise FrameTypeError(f"{what} dtype {show_value(dtype)} is not a NumPy dtype (uint8 or "
                             f"uint16)") from None
    frame = as_hwc(np.broadcast_to(np.zeros((), sample), sizes), what=what)  # no memory taken
    return frame.shape, frame.dtype


def as_frame_geometry(width: Any, height: Any, frame_rate: Any, *,
                      error: type[StreamconvError]) -> tuple[int, int, Fraction]:
    """A stream's frame size (integers >= 1) and frame rate (a finite number > 0) as (W, H, rate).

    Raises:
        ``error``: one of them of another type or out of range, named.
    """
    rate = check_number(frame_rate, "frame_rate", error)
    if rate <= 0:
        raise error(f"frame_rate must be more than 0, got {show_value(frame_rate)}")
    return as_count(width, "width", 1, error=error), as_count(height, "height", 1, error=error), \
        Fraction(rate)


def check_same_frame(dst: np.ndarray, src: np.ndarray,
                     shape: tuple[int, ...] | None = None) -> None:
    """Raise FrameFormatError unless dst has src's shape (or ``shape``, where the chain changes
    the frame's size), FrameTypeError unless src's dtype (a filter keeps the sample type)."""
    expected = src.shape if shape is None else tuple(shape)
    if dst.shape != expected:
        raise FrameFormatError(f"unexpected output shape: {dst.shape} != {expected}")
    if dst.dtype != src.dtype:
        raise FrameTypeError(f"unexpected output dtype: {dst.dtype} != {src.dtype}")


DEFAULT_MAX_PIXELS = 7680 * 4320
"""Largest frame (width x height) a run accepts unless told otherwise: 8K UHD."""


def check_frame_size(width: int, height: int, max_pixels: int | None, what: str) -> None:
    """Refuse a frame size over ``max_pixels`` (None: no limit), before any buffer is allocated.

    Raises:
        InputError: the frame is larger; the message gives both sizes and the memory it would take.
    """
    if max_pixels is not None and width * height > max_pixels:
        raise InputError(
            f"{what} has {width}x{height} frames ({width * height / 1e6:.1f} Mpixel, "
            f"{3 * width * height / 2**20:.0f} MiB per RGB frame), over the limit of "
            f"{max_pixels} pixels (--max-pixels)")


MAX_RING = 64
"""Most slots a pipeline's ring may have (``--ring``). Three let reading, filtering and writing
overlap; a few more absorb jitter. Beyond a few dozen, more slots only add latency and memory
(two host frames each: 64 slots of 8K RGB are 12 GiB)."""


def _read_int(path: str) -> int | None:
    """The integer in a one-line kernel file (cgroup limits), or None if absent or not a number."""
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def available_memory() -> int | None:
    """Bytes of host memory this process can still take without swapping, or None if unknown.

    The kernel's MemAvailable (free memory plus page cache it can drop), else free pages
    (``SC_AVPHYS_PAGES``); lowered to what the cgroup memory limits over this process leave
    (v2 ``memory.max``, v1 ``memory.limit_in_bytes``; :func:`memory_cgroups`), as in a
    container or a systemd slice a run is killed at that limit, not at the machine's.
    """
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    for folder in memory_cgroups():
        for limit_name, usage_name in (("memory.max", "memory.current"),
                                       ("memory.limit_in_bytes", "memory.usage_in_bytes")):
            limit = _read_int(os.path.join(folder, limit_name))
            used = _read_int(os.path.join(folder, usage_name))
            # "max" or 2^63: no limit
            if limit is not None and used is not None and limit < 1 << 60:
                available = min(available, max(0, limit - used))
    return available


CGROUP_MOUNT = "/sys/fs/cgroup"


def memory_cgroups(mount: str = CGROUP_MOUNT) -> list[str]:
    """The folders of the cgroups whose memory limits bind this process: its own and their
    ancestors (a limit binds every cgroup below it), for cgroup v2 (``mount``, or ``unified``
    beside v1) and v1 (``memory``), as /proc/self/cgroup names them; the mounts' roots too (in
    a container they are its own cgroup). Folders that are not there are left out."""
    bases = {"": (mount, os.path.join(mount, "unified")),
             "memory": (os.path.join(mount, "memory"),)}
    folders = [base for group in bases.values() for base in group]
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as membership:
            lines = membership.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        kind = "" if controllers == "" else "memory" if "memory" in controllers.split(",") else None
        parts = [part for part in path.split("/") if part]
        for base in bases.get(kind, ()) if kind is not None else ():
            folders.extend(os.path.join(base, *parts[:depth]) for depth in range(len(parts), 0, -1))
    return [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def check_host_memory(nbytes: int, what: str, *, hint: str = "") -> None:
    """Refuse to allocate ``nbytes`` of host memory that the machine does not have, before
    allocating any. NumPy reserves memory lazily, so an allocation over the free memory does
    not fail at once: the process is killed later, mid-run, when the pages are touched.

    Args:
        nbytes: the bytes about to be allocated.
        what: what they are for, to open the message ("64 slots of 3840x2160x3 uint8").
        hint: what to change, to end the message ("use a smaller --ring").

    Raises:
        InputError: ``nbytes`` is more than :func:`available_memory` (skipped when that is unknown).
    """
    available = available_memory()
    if available is not None and nbytes > available:
        raise InputError(f"{what} would take {_gib(nbytes)} of host memory, but only "
                         f"{_gib(available)} "
                         f"is available{'; ' + hint if hint else ''}")


INT32_MAX = 2**31 - 1
"""OpenCV counts a matrix's rows, columns and a row's bytes in 32-bit ints."""


def check_frame_fits(shape: tuple[int, int, int], dtype, copies: int, buffers: str, *,
                     hint: str = "") -> None:
    """Refuse, before any buffer is made, an (H, W, C) frame of ``dtype`` that the backends
    cannot filter: its rows, padded by the widest filter, too long for OpenCV's 32-bit counts
    as float32 work rows (a 1 x 2^31 frame made it ask for 2^64 - 6.4e9 bytes), or ``copies``
    frames of its size (``buffers`` says which, for the message: the result, slots, the
    backend's own) more than the host memory available (NumPy raised a bare MemoryError).

    Raises:
        FrameFormatError: H or W, padded, over INT32_MAX, or a padded float32 row over it in bytes.
        InputError: the copies would not fit (:func:`check_host_memory`).
    """
    height, width, channels = shape
    reach = 2 * (MAX_SIZE // 2)  # the padding of the widest filter, both sides
    widest, tallest = (INT32_MAX // 4) // channels - reach, INT32_MAX - reach
    if width > widest or height > tallest:
        raise FrameFormatError(f"a {width}x{height} frame of {channels} channel(s) is too large "
                               f"to filter: at most {widest} pixels a row and {tallest} rows")
    nbytes = copies * math.prod(shape) * np.dtype(dtype).itemsize  # Python ints: no overflow
    check_host_memory(nbytes, f"{copies} frames of {height}x{width}x{channels} "
                      f"{np.dtype(dtype).name} ({buffers})", hint=hint)


KEPT_FREE_BYTES = 64 << 20
"""Host memory a StreamFilter leaves free as it keeps outputs, so that the application can still
take them (a copy of each frame in flight, its own work on them)."""


def check_kept_output(nbytes: int, waiting: int) -> None:
    """Refuse, before a frame is submitted, to keep one more output of ``nbytes`` for a
    StreamFilter's result() (``waiting`` are kept already) in host memory that is not there:
    outputs never taken piled up until the process was killed, every frame lost.

    Raises:
        InputError: twice ``nbytes`` (the output, and the page-locked frame the next one lands
            in) and KEPT_FREE_BYTES (for taking the outputs back) is more than
            :func:`available_memory`.
    """
    check_host_memory(2 * nbytes + KEPT_FREE_BYTES, f"keeping output {waiting + 1} for result()",
                      hint="take outputs as frames are submitted (or use map()); no frame was lost")


def as_count(value: object, what: str, minimum: int, maximum: int | None = None, *,
             error: type[StreamconvError] = SettingsError) -> int:
    """``value`` as an int from ``minimum`` to ``maximum`` (None: no bound); any integer type
    (NumPy's too) but bool, which is an int to Python but here only a mistake (``ring=True``
    would mean 1).

    Raises:
        ``error`` (SettingsError unless told): a bool, a non-integer (3.0, "3") or an integer
        out of range.
    """
    number = None
    if not isinstance(value, bool):
        try:
            number = operator.index(value)
        except TypeError:
            pass
    if number is None or number < minimum or (maximum is not None and number > maximum):
        bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise error(f"{what} must be an integer {bounds}, got {show_value(value)}")
    return number


def check_slot_memory(shape: tuple[int, ...], dtype, ring: int, *, planes=None,
                      what: str = "frames", out_shape: tuple[int, ...] | None = None) -> int:
    """Refuse a ring of slots that does not fit in host memory, before any slot is allocated.

    Every slot holds two host buffers (``host_in``, ``host_out``; page-locked on the CUDA
    backend, which checks device memory itself), each an (H, W, C) frame of ``dtype`` or,
    with ``planes``, the frame's flat 4:2:0 planes of ``planes.dtype``; ``host_out`` at the
    chain's output size.

    Args:
        shape: (H, W, C) of the frames (``Source.shape``).
        out_shape: (h, w, C) the chain makes of them, where a stage changes the size (None:
            ``shape``).
        dtype: their sample type, uint8 or uint16 (``Source.dtype``).
        ring: the number of slots, 1 to :data:`MAX_RING`.
        planes: the YuvLayout the slots carry instead of RGB, or None. Checking with None is
            an upper bound (planes take half the bytes of RGB).
        what: the frames' source, for the message.

    Returns:
        The bytes the slots will take.

    Raises:
        FrameFormatError: ``ring`` is outside 1..MAX_RING.
        InputError: the slots need more than the available memory; the message gives both.
    """
    if not 1 <= ring <= MAX_RING:
        raise FrameFormatError(f"ring must be 1 to {MAX_RING} slots, got {ring}")
    # The larger of input and output for both buffers: planes at the output's size are no larger.
    largest = max(shape, out_shape or shape, key=math.prod)
    if planes is not None:
        frame_bytes = planes.nbytes * math.prod(largest) // math.prod(shape)
        buffers = f"{planes.width}x{planes.height} {planes.pix_fmt} planes"
    else:
        frame_bytes = math.prod(largest) * np.dtype(dtype).itemsize  # Python ints: no overflow
        buffers = f"{'x'.join(map(str, largest))} {np.dtype(dtype).name} frames"
    needed = 2 * ring * frame_bytes
    check_host_memory(needed, f"{ring} slot(s) of 2 x {buffers} ({what})",
                      hint="use a smaller --ring or --max-pixels")
    return needed
