"""The textbook family: conv2d_textbook.cu, the kernels of PMPP chapter 7 as the book writes
them.

``naive`` (one thread per pixel, taps in global memory), ``constant`` (taps in constant memory),
``coarsened`` (several vertically adjacent outputs per thread), ``tiled`` (input-tile-sized
blocks, tile and halo in shared memory) and ``cached-halo`` (output-tile blocks, own pixels in
shared memory, the halo through the caches). Every variant gets the same macros, so one
compiled module serves all five.
"""

from __future__ import annotations

from ...chain.filters import FilterStage
from .base import KernelPlan, StagePlan, base_defines, cdiv, flat_taps

ENTRIES = {"cached-halo": "conv2d_cached", "tiled": "conv2d_tiled", "coarsened": "conv2d_coarsened",
           "constant": "conv2d_constant", "naive": "conv2d_naive"}
"""Variant -> entry point in conv2d_textbook.cu."""
SOURCES = {"conv2d_textbook": "sm_75"}
"""Its kernel files in cuda/textbook/ -> the oldest architecture each runs on."""
VARIANTS = tuple(ENTRIES)
SAMPLE_BYTES = (1,)

_BLOCK = (32, 8)  # one thread per pixel
_COARSEN = 4
_IN_TILE = 32
_TILE = 32


def prepare(stage: FilterStage, variant: str, sample_bytes: int) -> None:
    """Nothing: the taps go as they are; any taps run."""
    return None


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """The variant's launch; ``naive`` reads its taps from device memory, the others from constant
    memory."""
    height, width, channels = shape
    stage, variant = plan.stage, plan.variant
    bx, by = _BLOCK
    defines = {**base_defines(stage, channels, border_code), "BLOCK_X": bx, "BLOCK_Y": by,
               "COARSEN": _COARSEN, "IN_TILE": _IN_TILE, "TILE": _TILE}
    if variant == "tiled":
        out_tile = _IN_TILE - 2 * stage.radius
        block, grid = (_IN_TILE, _IN_TILE, 1), (cdiv(width, out_tile), cdiv(height, out_tile), 1)
    elif variant == "cached-halo":
        block, grid = (_TILE, _TILE, 1), (cdiv(width, _TILE), cdiv(height, _TILE), 1)
    else:
        rows = by * (_COARSEN if variant == "coarsened" else 1)
        block, grid = (bx, by, 1), (cdiv(width, bx), cdiv(height, rows), 1)
    taps = flat_taps(stage)
    return KernelPlan(variant, "conv2d_textbook", ENTRIES[variant], defines, block, grid,
                      {} if variant == "naive" else {"c_taps": taps},
                      taps if variant == "naive" else None, arguments="PPiiiiP",
                      products=height * width * channels * stage.size ** 2 * len(stage.taps))
