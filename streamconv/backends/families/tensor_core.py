"""The ``tensor-core`` family: conv2d_tc.cu, conv3_tc.cu for one 3x3 matrix, and
conv2d_tcp.cu for K from 11 to 31.

8-bit frames: each tap held as an integer over a power of two in 1-3 int8 digits
(:mod:`.integer_taps`), bytes times digits on the tensor cores (``mma`` u8 x s8) with exact
int32 sums, rounded once. conv3_tc.cu loads its A fragments straight from global memory;
conv2d_tc.cu stages an interleaved tile and keeps the tap fragments in registers, which bounds
its K at 9; conv2d_tcp.cu stages the channels as planes, which makes a tap row's band dense, and
adds the few taps that need a top digit on the CUDA cores (:mod:`.planar_taps`).
"""

from __future__ import annotations

import numpy as np

from ...errors import FilterSpecError
from ...chain.filters import FilterStage
from . import integer_taps, planar_taps
from .base import KernelPlan, StagePlan, base_defines, cdiv

SOURCES = {"conv2d_tc": "sm_80", "conv3_tc": "sm_80", "conv2d_tcp": "sm_80"}
"""Its kernel files in cuda/tensor_core/ -> the oldest architecture each runs on (the int8
``mma`` shapes they issue came with sm_80)."""
VARIANTS = ("tensor-core",)
SAMPLE_BYTES = (1,)
MAX_RADIUS = 15
"""conv2d_tcp.cu takes K up to 31 (conv_common.cuh's largest radius)."""
PLANAR_FROM_RADIUS = 5
"""Radii from which the stage runs as conv2d_tcp.cu (conv2d_tc.cu keeps its tap fragments in
registers, which bounds its K at 9)."""
_PLANAR_TILE = {"TILE_PX": 64, "TILE_H": 32, "WARPS": 4}  # conv2d_tcp.cu's tile

TILE = {"TILE_W": 128, "TILE_H": 32, "WARPS": 4}
"""conv2d_tc.cu's tile (benchmarks/README.md); conv3d_tc.cu takes the same."""
_CONV3_ROWS, _CONV3_WARPS = 8, 4  # conv3_tc.cu: output rows per warp, warps per block


def prepare(stage: FilterStage, variant: str,
            sample_bytes: int) -> integer_taps.IntegerTaps | planar_taps.PlanarTaps:
    """The taps' int8 digits (split into dense digits and sparse taps where conv2d_tcp.cu runs
    them).

    Raises:
        FilterSpecError: K above 31, a bank of two taps above K = 9, or taps its digits cannot
            hold within a quarter of an output step.
    """
    if stage.radius > MAX_RADIUS:
        raise FilterSpecError(f"--kernel {VARIANTS[0]} takes K up to {2 * MAX_RADIUS + 1}; "
                              f"{stage.describe()} is {stage.size} x {stage.size}")
    planar = stage.radius >= PLANAR_FROM_RADIUS
    if planar and len(stage.taps) > 1:
        raise FilterSpecError(f"--kernel {VARIANTS[0]} takes a bank of two taps up to K = "
                              f"{2 * PLANAR_FROM_RADIUS - 1}; {stage.describe()} is {stage.size} x "
                              f"{stage.size}")
    taps = planar_taps.quantize(stage.taps,
                                stage.radius) if planar else integer_taps.quantize(stage.taps)
    if taps is None:
        raise FilterSpecError(f"--kernel {VARIANTS[0]}: the taps of {stage.describe()} do not fit "
                              f"{integer_taps.MAX_DIGITS} int8 digits within "
                              f"{integer_taps.MAX_QUANT_ERROR} of an output step; use --kernel "
                              "auto")
    return taps


def one_3x3_matrix(stage: FilterStage) -> bool:
    """Whether the stage runs as conv3_tc.cu (a 3x3 bank runs as conv2d_tc.cu)."""
    return stage.radius == 1 and len(stage.taps) == 1


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """conv3_tc.cu's launch for one 3x3 matrix, conv2d_tcp.cu's from K = 11, else conv2d_tc.cu's:
    the digits' fragments and rounding."""
    height, width, channels = shape
    stage, taps = plan.stage, plan.data
    if isinstance(taps, planar_taps.PlanarTaps):
        return _planar_plan(plan, shape, border_code)
    ties_even, round_table = rounding(taps)
    defines = {**base_defines(stage, channels, border_code), "DIGITS": taps.digits,
               "TIES_EVEN": ties_even}
    if one_3x3_matrix(stage):
        defines.update(ROWS=_CONV3_ROWS, WARPS=_CONV3_WARPS)
        grid = (cdiv(width * channels, 128 * _CONV3_WARPS), cdiv(height, _CONV3_ROWS), 1)
        return KernelPlan(plan.variant, "conv3_tc", "conv3_tc_u8", defines,
                          (32 * _CONV3_WARPS, 1, 1), grid,
                          {"g_bband": integer_taps.band3_fragments(taps, channels),
                           "c_round": round_table},
                          products=integer_taps.band3_products_per_frame(height, width, channels,
                                                                         taps.digits),
                          math_unit="tensor")
    banks = len(stage.taps)
    layout = integer_taps.kernel_layout(stage.radius, channels, banks)
    defines.update(GROUP=layout.group, LDMATRIX=int(layout.ldmatrix), **TILE)
    grid = (cdiv(width * channels, TILE["TILE_W"]), cdiv(height, TILE["TILE_H"]), 1)
    return KernelPlan(plan.variant, "conv2d_tc", "conv2d_tc_u8", defines,
                      (32 * TILE["WARPS"], 1, 1), grid,
                      {"g_bfrag": integer_taps.fragment_table(taps, layout),
                       "c_round": round_table},
                      products=integer_taps.products_per_frame(layout, height, width, channels,
                                                               taps.digits, banks),
                      math_unit="tensor")


def rounding(taps: integer_taps.IntegerTaps) -> tuple[int, np.ndarray]:
    """(TIES_EVEN, c_round: int32 host array {shift, bias}): exact taps round ties to even like
    the CPU backend; others round them up (one instruction fewer), which moves nothing by more
    than the taps' own rounding may."""
    ties_even = int(taps.error == 0)
    return ties_even, np.array([taps.shift, (1 << (taps.shift - 1)) - ties_even], np.int32)


def _planar_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """conv2d_tcp.cu's launch: the dense digits' fragments, the sparse taps and the rounding."""
    height, width, channels = shape
    taps = plan.data
    ties_even, round_table = rounding(taps.taps)
    defines = {**base_defines(plan.stage, channels, border_code), "DIGITS": taps.dense,
               "TIES_EVEN": ties_even, "SPARSE": planar_taps.MAX_SPARSE if len(taps.sparse) else 0,
               **_PLANAR_TILE}
    grid = (cdiv(width, _PLANAR_TILE["TILE_PX"]), cdiv(height, _PLANAR_TILE["TILE_H"]), 1)
    units = channels * _PLANAR_TILE["TILE_PX"] // 8 * _PLANAR_TILE["TILE_H"] // 16
    layout = planar_taps.planar_layout(plan.stage.radius)
    return KernelPlan(plan.variant, "conv2d_tcp", "conv2d_tcp_u8", defines,
                      (32 * _PLANAR_TILE["WARPS"], 1, 1),
                      grid,
                      {"g_bfrag": planar_taps.planar_fragments(taps, plan.stage.radius),
                       "c_round": round_table,
                             **({"c_sparse": taps.sparse_table()} if len(taps.sparse) else {})},
                      products=planar_taps.products_per_frame(layout, grid, units, taps.dense),
                      math_unit="tensor")
