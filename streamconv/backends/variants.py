"""The CUDA kernel variants a filter stage can run as, and the ``auto`` choice among them.

Variants (``--kernel NAME``):

========================  ===================================================================
``register-blocked``      cuda/conv2d.cu: several outputs per thread, 4-16-byte loads, rows
                          through L1, accumulators in registers (the fast 2D kernel)
``tensor-core``           cuda/conv2d_tc.cu: integer taps (int8 digits) times bytes on the tensor
                          cores, exact int32 sums; K <= 9, 8-bit frames. A single 3x3 matrix
                          runs as cuda/conv3_tc.cu, which loads its fragments straight from
                          global memory
``separable``             cuda/sepconv.cu: row pass then column pass in one kernel, the
                          intermediate in shared memory; only for rank-1 taps. From
                          :data:`TENSOR_SEPARABLE_FROM_K` on, taps that are not exact run as
                          cuda/sepconv_tc.cu where separable_tc takes them: both passes on the
                          tensor cores, the intermediate as bytes in registers
``cached-halo``           textbook: output-tile blocks, own pixels in shared memory, halo via L2
``tiled``                 textbook: input-tile-sized blocks, tile + halo in shared memory
``coarsened``             textbook: several vertically adjacent outputs per thread
``constant``              textbook: one thread per pixel, taps in constant memory
``naive``                 textbook: one thread per pixel, taps in global memory
========================  ===================================================================

``auto`` (the default) takes ``separable`` for rank-1 taps from :data:`SEPARABLE_FROM_K` on;
otherwise ``tensor-core`` for K in :data:`TENSOR_CORE_KS` where the taps fit its integer digits
(integer_taps.quantize; at 3x3 a single matrix, not a bank), and ``register-blocked`` for the
rest: a built-in table from benchmarks on an H100 (``streamconv bench``), where each wins at
those sizes at 1080p and 4K. 16-bit frames (uint16 samples) run as ``register-blocked`` only:
the other variants take 8-bit samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from ..errors import FilterSpecError
from ..filters import FilterStage
from . import integer_taps, kernels, separable_tc
from .separable import factor_separable

AUTO = "auto"
REGISTER_BLOCKED = "register-blocked"
SEPARABLE = "separable"
TENSOR_CORE = "tensor-core"
TEXTBOOK = {  # variant -> entry point in cuda/conv2d_textbook.cu
    "cached-halo": "conv2d_cached",
    "tiled": "conv2d_tiled",
    "coarsened": "conv2d_coarsened",
    "constant": "conv2d_constant",
    "naive": "conv2d_naive",
}
VARIANTS = (REGISTER_BLOCKED, TENSOR_CORE, SEPARABLE, *TEXTBOOK)
KERNEL_CHOICES = (AUTO, *VARIANTS)
DEEP_KERNEL_CHOICES = (AUTO, REGISTER_BLOCKED)
"""The kernel choices that take 16-bit frames (the others take 8-bit samples only)."""

# auto: rank-1 taps of this size and larger run separable (measured on an H100; see the module doc).
# At 5x5 the tensor cores (with ldmatrix) beat it: 4K 0.043 ms against 0.046.
SEPARABLE_FROM_K = 7
# auto: other taps of these sizes run on the tensor cores (measured on an H100; see the module doc).
# At 3x3 only one matrix, on conv3_tc.cu: 4K 0.0232 ms against register-blocked's 0.0270, 1080p
# 0.0090 against 0.0108.
TENSOR_CORE_KS = (3, 5, 7, 9)
TENSOR_CORE_MAX_RADIUS = 4
"""conv2d_tc.cu keeps its tap fragments in registers, which bounds K at 9."""
# separable: rank-1 taps that are not exact run on the tensor cores (cuda/sepconv_tc.cu) from this
# size on, where separable_tc takes them. On an H100 at 4K: K = 31 0.058 ms against sepconv.cu's
# 0.167, K = 15 0.055 against 0.073; at K = 7 sepconv.cu is faster (0.050 against 0.054).
TENSOR_SEPARABLE_FROM_K = 15

# conv2d_tc.cu's tile (a sweep on an H100 at 4K and 1080p, K = 3 and 5: 128 x 32 bytes x rows
# with 4 warps was best or within 2% of the best; taller or wider tiles were 2-15% slower).
_TENSOR_TILE = {"TILE_W": 128, "TILE_H": 32, "WARPS": 4}

# conv3_tc.cu's launch: output rows per warp and warps per block (a sweep of its probe on an H100
# at 4K: 8 rows 0.0227 ms; 4 rows 0.0246, 6 rows 0.0235, 10 rows 0.0228).
_CONV3_ROWS, _CONV3_WARPS = 8, 4

# Textbook launch shapes (cuda/conv2d_textbook.cu).
_DIRECT_BLOCK = (32, 8)
_COARSEN = 4
_IN_TILE = 32
_TILE = 32


@dataclass(frozen=True)
class KernelPlan:
    """How one filter stage runs on frames of one shape.

    Attributes:
        variant: the variant name (one of :data:`VARIANTS`).
        source: kernel file stem in cuda/, e.g. ``"conv2d"``.
        entry: the ``extern "C"`` entry point.
        defines: the specialisation's macros.
        block: threads per block (x, y, z).
        grid: blocks (x, y, z) covering the frame.
        constants: ``__constant__`` or ``__device__`` symbol -> host array to copy into the module
            (float32 taps, or the tensor-core kernel's uint32 fragments and int32 rounding).
        global_taps: float32 host array the kernel reads from device memory (``naive``), or None.
    """

    variant: str
    source: str
    entry: str
    defines: dict[str, int]
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    global_taps: np.ndarray | None = None

    @property
    def label(self) -> str:
        """The specialisation's log label, with the variant first."""
        return f"{self.variant} {kernels.specialisation_name(self.source, self.defines)}"


def check_kernel(name: str) -> str:
    """``name`` if it is a known kernel choice; else a FilterSpecError listing them."""
    if name not in KERNEL_CHOICES:
        raise FilterSpecError(f"unknown kernel {name!r}; known: {', '.join(KERNEL_CHOICES)}")
    return name


def choose_variant(stage: FilterStage, kernel: str = AUTO, dtype=np.uint8) -> str:
    """The variant a stage runs as under ``kernel`` (``auto`` or a variant name) on frames of
    ``dtype`` (uint8 or uint16).

    Raises:
        FilterSpecError: ``separable`` asked for taps that are not rank 1, or a bank;
            ``tensor-core`` for K above 9 or taps its digits cannot hold; a variant other than
            ``register-blocked`` asked for 16-bit frames.
    """
    check_kernel(kernel)
    if np.dtype(dtype) != np.uint8:
        if kernel not in DEEP_KERNEL_CHOICES:
            raise FilterSpecError(f"--kernel {kernel} takes 8-bit frames only; 16-bit frames run as "
                                  f"{REGISTER_BLOCKED} (--kernel auto)")
        return REGISTER_BLOCKED
    separable = len(stage.taps) == 1 and factor_separable(stage.taps[0]) is not None
    if kernel == AUTO:
        if separable and stage.size >= SEPARABLE_FROM_K:
            return SEPARABLE
        if stage.size in TENSOR_CORE_KS and (stage.size > 3 or _one_3x3_matrix(stage)) \
                and integer_taps.quantize(stage.taps) is not None:
            return TENSOR_CORE
        return REGISTER_BLOCKED
    if kernel == SEPARABLE and not separable:
        why = "a bank of taps" if len(stage.taps) > 1 else "taps that are not rank 1"
        raise FilterSpecError(f"--kernel separable: {stage.describe()} has {why}; "
                              f"use --kernel auto or a 2D variant")
    if kernel == TENSOR_CORE:
        if stage.radius > TENSOR_CORE_MAX_RADIUS:
            raise FilterSpecError(f"--kernel {TENSOR_CORE} takes K up to {2 * TENSOR_CORE_MAX_RADIUS + 1}; "
                                  f"{stage.describe()} is {stage.size} x {stage.size}")
        if integer_taps.quantize(stage.taps) is None:
            raise FilterSpecError(f"--kernel {TENSOR_CORE}: the taps of {stage.describe()} do not fit "
                                  f"{integer_taps.MAX_DIGITS} int8 digits within "
                                  f"{integer_taps.MAX_QUANT_ERROR} of an output step; "
                                  f"use --kernel auto")
    return kernel


def supports(stage: FilterStage, kernel: str, dtype=np.uint8) -> bool:
    """Whether ``kernel`` can run ``stage`` on frames of ``dtype`` (choose_variant would not raise)."""
    try:
        choose_variant(stage, kernel, dtype)
    except FilterSpecError:
        return False
    return True


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sepconv_geometry(radius: int) -> dict[str, int]:
    """sepconv.cu tile by radius, from a sweep on an H100 at 4K (tile 64-256 bytes x 32-128
    rows, runs of 16/32, 8/16 rows per column item): 8 rows per column item always won (fewer
    registers); wide taps want tall tiles, where the halo rows cost less."""
    if radius <= 2:
        return {"TILE_X": 128, "TILE_Y": 32, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 128}
    if radius == 3:
        return {"TILE_X": 64, "TILE_Y": 64, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 128}
    return {"TILE_X": 64, "TILE_Y": 128, "ROW_RUN": 16, "COL_RUN": 8, "THREADS": 256}


def plan_stage(stage: FilterStage, shape: tuple[int, int, int], border_code: int,
               kernel: str = AUTO, dtype=np.uint8) -> KernelPlan:
    """The kernel plan of ``stage`` for (H, W, C) frames of ``dtype`` (uint8 or uint16) under
    ``kernel``.

    Raises:
        FilterSpecError: an unknown kernel, or a variant that cannot run the stage or the dtype.
    """
    height, width, channels = shape
    variant = choose_variant(stage, kernel, dtype)
    elem_bytes = np.dtype(dtype).itemsize
    banks = len(stage.taps)
    base = {"RADIUS": stage.radius, "CHANNELS": channels, "BORDER": border_code, "BANKS": banks,
            "COMBINE": int(banks == 2)}
    taps = np.ascontiguousarray(np.concatenate([t.ravel() for t in stage.taps]), np.float32)
    if variant == REGISTER_BLOCKED:
        geometry = kernels.conv2d_geometry(stage.radius, channels, banks, elem_bytes)
        defines = kernels.conv2d_defines(stage.radius, channels, border_code, banks, elem_bytes)
        entry = "conv2d_u8" if elem_bytes == 1 else "conv2d_u16"
        constants = {"c_taps": taps}
        offsets = kernels.conversion_offsets(stage.taps, elem_bytes)
        if offsets is not None:
            defines["OFFSET_CVT"] = 1
            constants["c_offset"] = offsets
        return KernelPlan(variant, "conv2d", entry, defines, geometry.block,
                          geometry.grid(width * channels, height), constants)
    if variant == TENSOR_CORE:
        return _tensor_core_plan(stage, width, height, channels, base)
    if variant == SEPARABLE:
        factors = factor_separable(stage.taps[0])
        assert factors is not None  # choose_variant checked
        # Exact taps stay on sepconv.cu, whose output is byte for byte the 2D one.
        fast = None if factors.exact or stage.size < TENSOR_SEPARABLE_FROM_K else \
            separable_tc.plan(factors, stage.radius, channels)
        if fast is not None:
            block, grid = separable_tc.launch(width, height, channels)
            defines = {**base, "MT": separable_tc.MT, "WARPS": separable_tc.WARPS, "STRIP_H": separable_tc.STRIP_H}
            return KernelPlan(variant, "sepconv_tc", "sepconv_tc_u8", defines, block, grid,
                              {"g_arow": fast.arow, "g_acol": fast.acol, "c_round": fast.rounding})
        tile = _sepconv_geometry(stage.radius)
        grid = (_cdiv(width * channels, tile["TILE_X"]), _cdiv(height, tile["TILE_Y"]), 1)
        return KernelPlan(variant, "sepconv", "sepconv_u8", {**base, **tile}, (tile["THREADS"], 1, 1), grid,
                          {"c_row": factors.row, "c_col": factors.column})
    entry = TEXTBOOK[variant]
    # Every textbook variant gets the same macros, so one compiled module serves all five.
    bx, by = _DIRECT_BLOCK
    defines = {**base, "BLOCK_X": bx, "BLOCK_Y": by, "COARSEN": _COARSEN, "IN_TILE": _IN_TILE, "TILE": _TILE}
    if variant == "tiled":
        out_tile = _IN_TILE - 2 * stage.radius
        block, grid = (_IN_TILE, _IN_TILE, 1), (_cdiv(width, out_tile), _cdiv(height, out_tile), 1)
    elif variant == "cached-halo":
        block, grid = (_TILE, _TILE, 1), (_cdiv(width, _TILE), _cdiv(height, _TILE), 1)
    else:
        rows = by * (_COARSEN if variant == "coarsened" else 1)
        block, grid = (bx, by, 1), (_cdiv(width, bx), _cdiv(height, rows), 1)
    constants = {} if variant == "naive" else {"c_taps": taps}
    return KernelPlan(variant, "conv2d_textbook", entry, defines, block, grid, constants,
                      taps if variant == "naive" else None)


def _one_3x3_matrix(stage: FilterStage) -> bool:
    """Whether the tensor-core variant runs the stage as cuda/conv3_tc.cu (a 3x3 bank runs as
    conv2d_tc.cu, which loses to register-blocked there, so auto leaves it)."""
    return stage.radius == 1 and len(stage.taps) == 1


def _tensor_core_plan(stage: FilterStage, width: int, height: int, channels: int,
                      base: dict[str, int]) -> KernelPlan:
    """conv2d_tc.cu's plan (conv3_tc.cu's for one 3x3 matrix): the taps' digits (integer_taps),
    their fragments and rounding."""
    taps = integer_taps.quantize(stage.taps)
    assert taps is not None  # choose_variant checked
    # Exact taps round ties to even like the CPU backend; others round them up (one instruction
    # fewer), which moves nothing by more than the taps' own rounding already may.
    ties_even = int(taps.error == 0)
    bias = (1 << (taps.shift - 1)) - ties_even
    rounding = np.array([taps.shift, bias], np.int32)
    if _one_3x3_matrix(stage):
        defines = {**base, "DIGITS": taps.digits, "TIES_EVEN": ties_even, "ROWS": _CONV3_ROWS,
                   "WARPS": _CONV3_WARPS}
        grid = (_cdiv(width * channels, 128 * _CONV3_WARPS), _cdiv(height, _CONV3_ROWS), 1)
        return KernelPlan(TENSOR_CORE, "conv3_tc", "conv3_tc_u8", defines, (32 * _CONV3_WARPS, 1, 1), grid,
                          {"g_bband": integer_taps.band3_fragments(taps, channels), "c_round": rounding})
    layout = integer_taps.kernel_layout(stage.radius, channels, len(stage.taps))
    defines = {**base, "DIGITS": taps.digits, "TIES_EVEN": ties_even, "GROUP": layout.group,
               "LDMATRIX": int(layout.ldmatrix), **_TENSOR_TILE}
    tile_w, tile_h = _TENSOR_TILE["TILE_W"], _TENSOR_TILE["TILE_H"]
    grid = (_cdiv(width * channels, tile_w), _cdiv(height, tile_h), 1)
    constants = {"g_bfrag": integer_taps.fragment_table(taps, layout),
                 "c_round": rounding}
    return KernelPlan(TENSOR_CORE, "conv2d_tc", "conv2d_tc_u8", defines, (32 * _TENSOR_TILE["WARPS"], 1, 1),
                      grid, constants)


def precompile_plans(plans: Iterable[KernelPlan], arch: str, workers: int = 8) -> None:
    """Compile, in parallel, each distinct (kernel file, defines) specialisation that ``plans``
    name, so that their later loads hit the cache (kernels.precompile)."""
    wanted = {(plan.source, tuple(sorted(plan.defines.items()))) for plan in plans}
    kernels.precompile([(source, dict(items)) for source, items in sorted(wanted)], arch, workers=workers)


def plan_arguments(plan: KernelPlan) -> str:
    """The PyCUDA ``prepare`` signature of the plan's entry point."""
    return "PPiiii" if plan.source in ("conv2d", "conv2d_tc", "conv3_tc", "sepconv", "sepconv_tc") else "PPiiiiP"
