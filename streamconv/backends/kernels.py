"""The one place CUDA kernels are compiled: read from the installed package, specialised, memoized.

A *specialisation* is a kernel file plus sorted ``#define``s, e.g.
``conv2d[BANKS=1,BORDER=reflect101,CHANNELS=3,RADIUS=2]``. Each is compiled with nvcc
(through PyCUDA) once per process and GPU architecture, and PyCUDA's on-disk cache keeps
the cubin across processes. A module instance is loaded per filter stage, because each
stage holds its own taps in the module's ``__constant__`` memory.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..borders import BORDER_CODES
from ..errors import BackendUnavailableError, KernelCompileError
from ..resources import data_dir

log = logging.getLogger(__name__)

NVCC_OPTIONS = ("-O3", "-std=c++17")


@dataclass(frozen=True)
class LaunchGeometry:
    """Threads per block (block_x, block_y) and outputs per thread (out_x samples, out_y rows)."""

    block_x: int
    block_y: int
    out_x: int
    out_y: int

    def grid(self, row_samples: int, height: int) -> tuple[int, int, int]:
        """Blocks needed to cover ``height`` rows of ``row_samples`` samples (W x C)."""
        per_block_x = self.block_x * self.out_x
        per_block_y = self.block_y * self.out_y
        return (-(-row_samples // per_block_x), -(-height // per_block_y), 1)

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.block_x, self.block_y, 1)

    def defines(self) -> dict[str, int]:
        return {"BLOCK_X": self.block_x, "BLOCK_Y": self.block_y, "OUT_X": self.out_x, "OUT_Y": self.out_y}


def conv2d_geometry(radius: int, channels: int, banks: int = 1, elem_bytes: int = 1) -> LaunchGeometry:
    """Launch geometry for conv2d.cu by filter radius and channel count, tuned on an H100
    for uint8 samples (``elem_bytes`` 1).

    Radii 0-3 run fully unrolled with rolling row accumulators, so more rows per thread
    (OUT_Y) means each loaded input row feeds more outputs; larger radii are bound by FMA
    issue and use a small tile. Every uint8 entry compiles without register spills under
    nvcc 13 for sm_90 (R=5 with one channel spills at the general (32, 4, 8, 4)).
    uint16 samples (``elem_bytes`` 2): the unrolled radii 0-3 keep the rows and take half the
    samples per thread (at least 4), so a thread's window keeps its bytes and registers (4K,
    H200: K=3 0.034 ms against 0.038 with the uint8 width); the looped radii keep the uint8
    geometry (K=9 0.181 ms against 0.245 at half width, K=31 1.35 against 1.66). Only R=3 with
    four channels spills (8 bytes).

    Blocks of 16 x 8 threads for R=1 (one bank) and R=3 (RGB) instead of 32 x 4: a 1080p RGB
    row (5760 bytes) then splits into 256-byte block tiles (22.5 of them) rather than 512-byte
    ones (11.25), so less of the last block column idles. On the H100, RGB: K=3 1080p 0.0112
    ms against 0.0141, 4K unchanged (0.0281); K=7 1080p 0.0383 against 0.0400, 4K 0.1135
    against 0.1161.
    """
    geometry = _conv2d_geometry_u8(radius, channels, banks)
    if elem_bytes == 2 and radius < 4:
        geometry = LaunchGeometry(geometry.block_x, geometry.block_y, max(4, geometry.out_x // 2), geometry.out_y)
    return geometry


def _conv2d_geometry_u8(radius: int, channels: int, banks: int) -> LaunchGeometry:
    if radius == 0:
        return LaunchGeometry(32, 8, 16, 4)
    if radius == 1:  # a bank (edge) keeps the narrower tile: twice the accumulators
        return LaunchGeometry(16, 8, 16, 4) if banks == 1 else LaunchGeometry(32, 4, 8, 4)
    if radius == 2:
        return LaunchGeometry(32, 4, 8, 16)
    if radius == 3:
        return LaunchGeometry(32, 4, 8, 15) if channels == 1 else LaunchGeometry(16, 8, 4, 15)
    if radius == 5 and channels == 1:
        return LaunchGeometry(32, 8, 8, 4)
    return LaunchGeometry(32, 4, 8, 4)


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
    from pycuda import compiler
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
    import pycuda.driver as driver

    return driver.module_from_buffer(compile_kernel(name, defines, arch))


CONVERSION_OFFSET = 2.0 ** 15
"""What conv2d.cu's OFFSET_CVT adds to every byte it widens (conv_common.cuh, byte_plus_2p15)."""

MAX_OFFSET_ERROR = 0.5
"""The most, in output steps (LSB), that OFFSET_CVT may add to a sum's worst-case rounding error."""


def conversion_offsets(banks: Sequence[np.ndarray], elem_bytes: int = 1) -> np.ndarray | None:
    """``c_offset`` for conv2d.cu's OFFSET_CVT, or None where the plain byte conversion must stay.

    OFFSET_CVT widens each byte to 2^15 + byte with one PRMT instead of PRMT + FADD, and starts
    bank b's sum at -c_offset[b] = -2^15 x (sum of its taps). Its partial sums are then about
    2^15 x sum|taps| in magnitude instead of 255 x sum|taps|, so float32 rounds them more
    coarsely. It is used only where that costs nothing that is promised:

    - taps that the plain conversion sums exactly (every tap a multiple of 2^-g, all partial sums
      below 2^24 x 2^-g): OFFSET_CVT only where its own partial sums are exact too, so the output
      stays bit-exact;
    - other taps: only where its worst-case added rounding error, summed over the banks, is at
      most :data:`MAX_OFFSET_ERROR` (half an output step), so the output stays within 1 LSB.

    Args:
        banks: each bank's (K, K) taps (host NumPy, any float dtype; rounded to float32 as the
            GPU holds them).
        elem_bytes: 1 for uint8 samples; OFFSET_CVT takes no other.

    Returns:
        (len(banks),) float32 host array, or None.
    """
    if elem_bytes != 1:
        return None
    offsets, bound = [], 0.0
    for taps in banks:
        t = np.asarray(taps, np.float32).astype(np.float64).ravel()
        offset = float(np.float32(CONVERSION_OFFSET * t.sum()))
        total = float(np.abs(t).sum())
        peak = abs(offset) + total * (CONVERSION_OFFSET + 255)  # largest partial sum
        grain = _dyadic_grain(t)
        if grain is not None and 255 * total < grain * 2.0 ** 24:
            if peak >= grain * 2.0 ** 24:
                return None
        else:  # one rounding (at most 2^-24 relative) per term, and one for the offset itself
            bound += 2.0 ** -24 * (t.size * peak + abs(offset))
        offsets.append(offset)
    return None if bound > MAX_OFFSET_ERROR else np.array(offsets, np.float32)


def _dyadic_grain(taps: np.ndarray) -> float | None:
    """The largest 2^-g (g = 0..40) that every tap is a multiple of, or None."""
    for g in range(41):
        scaled = taps * 2.0 ** g
        if np.array_equal(scaled, np.round(scaled)):
            return 2.0 ** -g
    return None


def conv2d_defines(radius: int, channels: int, border_code: int, banks: int,
                   elem_bytes: int = 1) -> dict[str, int]:
    """The #defines of one conv2d.cu specialisation, geometry included (ELEM_BYTES only for
    uint16 samples, so uint8 specialisations keep their names and cache entries)."""
    defines = {"RADIUS": radius, "CHANNELS": channels, "BORDER": border_code, "BANKS": banks,
               "COMBINE": int(banks == 2), **conv2d_geometry(radius, channels, banks, elem_bytes).defines()}
    if elem_bytes != 1:
        defines["ELEM_BYTES"] = elem_bytes
    return defines


def precompile(specialisations: list[tuple[str, Mapping[str, object]]], arch: str, *,
               workers: int = 8) -> None:
    """Compile many (kernel file, defines) specialisations in parallel (nvcc runs as separate
    processes), filling the caches."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda item: compile_kernel(item[0], item[1], arch), specialisations))
