"""The ``register-blocked`` family: conv2d.cu, the fast 2D kernel for any taps and both sample
sizes.

Several outputs per thread, rows read with 4-16-byte loads through L1, a ring of row
accumulators in registers. Its host side: the launch geometry by radius and channels, and
OFFSET_CVT's conversion offsets (bytes widened to 2^15 + byte with one instruction) where they
cost nothing that is promised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...chain.filters import FilterStage
from .base import KernelPlan, StagePlan, flat_taps

SOURCES = {"conv2d": "sm_75"}
"""Its kernel files in cuda/register_blocked/ -> the oldest architecture each runs on."""
VARIANTS = ("register-blocked",)
SAMPLE_BYTES = (1, 2)


def prepare(stage: FilterStage, variant: str, sample_bytes: int) -> np.ndarray | None:
    """OFFSET_CVT's ``c_offset`` for the stage's taps, or None for the plain conversion; any taps
    run."""
    return conversion_offsets(stage.taps, sample_bytes)


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """conv2d.cu's launch for (H, W, C) frames; ``plan.data`` holds the conversion offsets."""
    height, width, channels = shape
    stage, elem_bytes = plan.stage, plan.sample_bytes
    banks = len(stage.taps)
    geometry = conv2d_geometry(stage.radius, channels, banks, elem_bytes)
    defines = conv2d_defines(stage.radius, channels, border_code, banks, elem_bytes)
    constants = {"c_taps": flat_taps(stage)}
    if plan.data is not None:
        defines["OFFSET_CVT"] = 1
        constants["c_offset"] = plan.data
    return KernelPlan(plan.variant, "conv2d", "conv2d_u8" if elem_bytes == 1 else "conv2d_u16",
                      defines, geometry.block, geometry.grid(width * channels, height), constants,
                      products=height * width * channels * stage.size ** 2 * banks)


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
        return {"BLOCK_X": self.block_x, "BLOCK_Y": self.block_y, "OUT_X": self.out_x,
                "OUT_Y": self.out_y}


def conv2d_geometry(radius: int, channels: int, banks: int = 1,
                    elem_bytes: int = 1) -> LaunchGeometry:
    """Launch geometry for conv2d.cu by filter radius and channel count (tuned on an H100 for
    uint8 samples; the sweeps are in benchmarks/README.md, "register-blocked launch geometry").

    Radii 0-3 run fully unrolled with rolling row accumulators, so more rows per thread (OUT_Y)
    let each loaded row feed more outputs; larger radii are bound by FMA issue and use a small
    tile. Every uint8 entry compiles without register spills for sm_90. uint16 samples
    (``elem_bytes`` 2): the unrolled radii take half the samples per thread (at least 4), so a
    thread's window keeps its bytes and registers; the looped radii keep the uint8 geometry.
    Blocks of 16 x 8 threads for R=1 (one bank) and R=3 (RGB): a 1080p RGB row then splits into
    256-byte block tiles rather than 512-byte ones, so less of the last block column idles.
    """
    geometry = _conv2d_geometry_u8(radius, channels, banks)
    if elem_bytes == 2 and radius < 4:
        geometry = LaunchGeometry(geometry.block_x, geometry.block_y, max(4, geometry.out_x // 2),
                                  geometry.out_y)
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
               "COMBINE": int(banks == 2),
               **conv2d_geometry(radius, channels, banks, elem_bytes).defines()}
    if elem_bytes != 1:
        defines["ELEM_BYTES"] = elem_bytes
    return defines
