"""The ``separable`` family: sepconv.cu, and sepconv_tc.cu for large taps that are not
exact.

For rank-1 taps (:mod:`.rank1`): a row pass, then a column pass, in one
kernel (2K instead of K^2 multiply-adds per output). Exact taps get exact integer factors and
stay on sepconv.cu, whose output is then byte-identical to the 2D one. Other taps from
:data:`TENSOR_FROM_K` on whose row factor is single-signed run both passes on the tensor cores
(:mod:`.separable_tc`), within 1 LSB of the CPU.
"""

from __future__ import annotations

from ...errors import FilterSpecError
from ...chain.filters import FilterStage
from . import separable_tc
from .rank1 import SeparableTaps, factor_separable
from .base import KernelPlan, StagePlan, base_defines, cdiv

SOURCES = {"sepconv": "sm_75", "sepconv_tc": "sm_80"}
"""Its kernel files in cuda/separable/ -> the oldest architecture each runs on (sepconv_tc.cu
issues sm_80's int8 ``mma``; without it the family keeps to sepconv.cu)."""
VARIANTS = ("separable",)
SAMPLE_BYTES = (1,)
TENSOR_FROM_K = 15
"""From this K on, taps that are not exact run on sepconv_tc.cu where it takes them."""


def prepare(stage: FilterStage, variant: str, sample_bytes: int) -> SeparableTaps:
    """The taps' row and column factors.

    Raises:
        FilterSpecError: a bank of taps, or taps that are not rank 1.
    """
    factors = factor_separable(stage.taps[0]) if len(stage.taps) == 1 else None
    if factors is None:
        why = "a bank of taps" if len(stage.taps) > 1 else "taps that are not rank 1"
        raise FilterSpecError(f"--kernel separable: {stage.describe()} has {why}; "
                              f"use --kernel auto or a 2D variant")
    return factors


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """sepconv_tc.cu's launch where it takes the taps at this channel count, else sepconv.cu's."""
    height, width, channels = shape
    stage, factors = plan.stage, plan.data
    base = base_defines(stage, channels, border_code)
    fast = None if factors.exact or stage.size < TENSOR_FROM_K or not plan.tensor_cores else \
        separable_tc.plan(factors, stage.radius, channels)
    if fast is not None:
        block, grid = separable_tc.launch(width, height, channels)
        defines = {**base, "MT": separable_tc.MT, "WARPS": separable_tc.WARPS,
                   "STRIP_H": separable_tc.STRIP_H}
        return KernelPlan(plan.variant, "sepconv_tc", "sepconv_tc_u8", defines, block, grid,
                          {"g_arow": fast.arow, "g_acol": fast.acol, "c_round": fast.rounding},
                          products=separable_tc.products_per_frame(height, width, channels,
                                                                   stage.radius),
                          math_unit="tensor")
    tile = _tile(stage.radius)
    grid = (cdiv(width * channels, tile["TILE_X"]), cdiv(height, tile["TILE_Y"]), 1)
    return KernelPlan(plan.variant, "sepconv", "sepconv_u8", {**base, **tile},
                      (tile["THREADS"], 1, 1), grid,
                      {"c_row": factors.row, "c_col": factors.column},
                      products=height * width * channels * 2 * stage.size)


def _tile(radius: int) -> dict[str, int]:
    """sepconv.cu's tile by radius (a sweep on an H100, benchmarks/README.md): 8 rows per column
    item (fewer registers); wide taps want tall tiles, where the halo rows cost less."""
    if radius <= 2:
        return {"TILE_X": 128, "TILE_Y": 32, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 128}
    if radius == 3:
        return {"TILE_X": 64, "TILE_Y": 64, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 128}
    return {"TILE_X": 64, "TILE_Y": 128, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 256}
