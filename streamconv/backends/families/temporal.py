"""The ``temporal`` family: the kernels of stages across frames, temporal.cu (1 x 1 taps: time
only), conv3d_tc.cu (8-bit frames, K from 3 to 9, taps that do not factor, on a GPU with int8
tensor cores: the window's taps as int8 digits, :mod:`.integer_taps`) and conv3d.cu (K x K taps
per frame in float32, in full or as time x space: taps that factor, 16-bit frames, larger K,
older GPUs, taps the digits cannot hold).

A temporal stage runs whatever ``--kernel`` says (like a convolution layer): the taps decide.
Its kernels take the window's frames as a struct of 15 device pointers (those of the used window
positions, :attr:`streamconv.chain.temporal.TemporalTaps.used`, first; the rest 0), then the
output, width, height and the two pitches. The separable form (the time sum staged once, then
one K x K pass) is taken where the taps factor and it keeps every promise: for exact taps only
where both factors keep every product and sum exact too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain.filters import FilterStage
from ...chain.temporal import TemporalTaps
from . import integer_taps, tensor_core
from .base import KernelPlan, StagePlan, cdiv

SOURCES = {"temporal": "sm_75", "conv3d": "sm_75", "conv3d_tc": "sm_80"}
"""Its kernel files in cuda/temporal/ -> the oldest architecture each runs on."""
VARIANTS = ("temporal",)
SAMPLE_BYTES = (1, 2)
MAX_POINTERS = 15
ARGUMENTS = "[" + "P" * MAX_POINTERS + "]Piiii"
"""conv3d.cu's signature (:class:`streamconv.gpu.binding.Kernel`): the frames (a struct of
pointers), the output, width, height, src and dst pitches."""
TCONV_ARGUMENTS = ARGUMENTS + "i"
"""temporal.cu's: those, then whether the blocks take the frame from its end (``reverse``)."""

TCONV_THREADS = 256
CONV3D_SMEM = 48 * 1024
TC_RADII = (1, 2, 3, 4)
"""Radii conv3d_tc.cu takes (its B fragments per frame grow with K, as conv2d_tc.cu's)."""


@dataclass(frozen=True)
class TemporalPlan:
    """What the family takes from a stage's taps: the window positions it reads (at least one:
    all-zero taps read the first frame times 0), whether conv3d.cu runs it separably, and the
    used frames' taps as int8 digits for conv3d_tc.cu (None where it does not run them)."""

    used: tuple[int, ...]
    separable: bool
    integer: integer_taps.IntegerTaps | None = None


def prepare(stage: FilterStage, variant: str, sample_bytes: int) -> TemporalPlan:
    """The positions read and the form; any temporal taps run."""
    taps = stage.temporal
    assert taps is not None, "the temporal family runs temporal stages only"
    maximum = 255 if sample_bytes == 1 else 65535
    used = taps.used or (0,)
    separable = separable_form(taps, maximum)
    # Taps that factor keep conv3d.cu's time-then-space form, no digits: on an H100 at 4K,
    # tdenoise's 5x5x5 took 0.156 ms there against 0.204 on the tensor cores (benchmarks/README.md).
    integer = window_digits(taps.taps[list(used)]) \
        if sample_bytes == 1 and taps.size // 2 in TC_RADII and not separable else None
    return TemporalPlan(used, separable, integer)


def window_digits(taps: np.ndarray) -> integer_taps.IntegerTaps | None:
    """The (T, K, K) taps of the used frames (host array) as integers over one power of two in
    int8 digits (values (T, K, K): one "bank" per frame, as conv3d_tc.cu's fragments take them),
    rounded within :data:`integer_taps.MAX_QUANT_ERROR` of an output step over the whole window
    (exact where the taps are); None where 3 digits cannot hold them so or the sums could
    overflow int32."""
    frames, size = taps.shape[0], taps.shape[1]
    whole = integer_taps.quantize([taps.reshape(frames * size, size)])
    if whole is None:
        return None
    return integer_taps.IntegerTaps(whole.values.reshape(frames, size, size), whole.shift,
                                    whole.digits, whole.error)


def separable_form(taps: TemporalTaps, maximum: int) -> bool:
    """Whether conv3d.cu may sum over time first and filter space once: the taps are a product
    time x space, and either they are not exact (so within 1 LSB is what is promised) or every
    time sum and every space sum over samples up to ``maximum`` is exact in float32 too."""
    if taps.time is None or taps.space is None or taps.size == 1:
        return False
    full = taps.taps.astype(np.float64)
    if not _exact(full, maximum):
        return True
    time, space = taps.time.astype(np.float64), taps.space.astype(np.float64)
    time_grain, space_grain = _grain(time), _grain(space)
    if time_grain is None or space_grain is None:
        return False
    mid_peak = maximum * float(np.abs(time).sum())
    out_peak = mid_peak * float(np.abs(space).sum())
    return mid_peak < time_grain * 2.0**24 and out_peak < time_grain * space_grain * 2.0**24


def _exact(taps: np.ndarray, maximum: int) -> bool:
    """Every tap a multiple of 1/256 and maximum x sum |taps| <= 2^16 (the CPU's exact case)."""
    scaled = taps * 256
    return bool(np.array_equal(scaled, np.round(scaled))
                and maximum * np.abs(taps).sum() <= 1 << 16)


def _grain(values: np.ndarray) -> float | None:
    """The largest 2^-g (g = 0..40) every value is a multiple of, or None."""
    for g in range(41):
        scaled = values * 2.0**g
        if np.array_equal(scaled, np.round(scaled)):
            return 2.0**-g
    return None


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """temporal.cu's launch for 1 x 1 taps, else conv3d.cu's, for (H, W, C) frames."""
    height, width, channels = shape
    taps, data = plan.stage.temporal, plan.data
    assert taps is not None and isinstance(data, TemporalPlan)
    used = list(data.used)
    defines = {"TAPS": len(used), "CHANNELS": channels}
    if plan.sample_bytes != 1:
        defines["ELEM_BYTES"] = plan.sample_bytes
    if taps.size == 1:
        threads, vecs = tconv_geometry(len(used))
        per_row = cdiv(width * channels * plan.sample_bytes, 16)
        grid = (cdiv(height * per_row, threads * vecs), 1, 1)
        defines.update(THREADS=threads, VECS=vecs)
        return KernelPlan(plan.variant, "temporal", _entry("tconv", plan.sample_bytes), defines,
                          (threads, 1, 1), grid, {"c_wt": _floats(taps.taps[used, 0, 0])},
                          arguments=TCONV_ARGUMENTS, products=height * width * channels * len(used))
    radius = taps.size // 2
    if data.integer is not None and plan.tensor_cores:
        return _tc_plan(plan, shape, border_code)
    defines.update(RADIUS=radius, BORDER=border_code, SEPARABLE=int(data.separable),
                   **conv3d_geometry(radius, channels, plan.sample_bytes, data.separable))
    if data.separable:
        assert taps.time is not None and taps.space is not None  # separable_form checked them
        constants = {"c_wt": _floats(taps.time[used]), "c_space": _floats(taps.space)}
        products = height * width * channels * (len(used) + taps.size**2)
    else:
        constants = {"c_taps": _floats(taps.taps[used])}
        products = height * width * channels * len(used) * taps.size**2
    tile_x, tile_y = defines["BLOCK_X"] * defines["OUT_X"], defines["BLOCK_Y"] * defines["OUT_Y"]
    return KernelPlan(plan.variant, "conv3d", _entry("conv3d", plan.sample_bytes), defines,
                      (defines["BLOCK_X"], defines["BLOCK_Y"], 1),
                      (cdiv(width * channels, tile_x), cdiv(height, tile_y), 1), constants,
                      arguments=ARGUMENTS, products=products)


def _tc_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """conv3d_tc.cu's launch: every used frame's digit fragments, one after another, and the
    rounding."""
    height, width, channels = shape
    data = plan.data
    assert isinstance(data, TemporalPlan) and data.integer is not None
    digits = data.integer
    radius = digits.values.shape[1] // 2
    layout = integer_taps.kernel_layout(radius, channels)
    ties_even, round_table = tensor_core.rounding(digits)
    tile = tensor_core.TILE  # conv3d_tc.cu's, as conv2d_tc.cu's
    defines = {"TAPS": len(data.used), "CHANNELS": channels, "RADIUS": radius,
               "BORDER": border_code, "DIGITS": digits.digits, "TIES_EVEN": ties_even,
               "GROUP": layout.group, "LDMATRIX": int(layout.ldmatrix), **tile}
    grid = (cdiv(width * channels, tile["TILE_W"]), cdiv(height, tile["TILE_H"]), 1)
    products = len(data.used) * integer_taps.products_per_frame(layout, height, width, channels,
                                                                 digits.digits)
    return KernelPlan(plan.variant, "conv3d_tc", "conv3d_tc_u8", defines,
                      (32 * tile["WARPS"], 1, 1), grid,
                      {"g_bfrag": integer_taps.fragment_table(digits, layout),
                       "c_round": round_table},
                      arguments=ARGUMENTS, products=products, math_unit="tensor")


def tconv_geometry(frames: int) -> tuple[int, int]:
    """temporal.cu's threads per block and 16-byte vectors per thread (one: on an H200 two were
    no faster at 5 frames, 0.0395 ms against 0.0385, and four slower)."""
    return TCONV_THREADS, 1


def conv3d_geometry(radius: int, channels: int, sample_bytes: int,
                    separable: bool = False) -> dict[str, int]:
    """conv3d.cu's block and outputs per thread: 32 threads of 4 samples across; for the full
    form up to K = 7, 8 rows of threads of 4 output rows each (on an H100, random 5x5x5 taps at
    4K: 0.288 ms, against 0.358 ms for 4 rows of 8 and more for taller runs, which take more
    registers), else as many rows of threads of 8 rows (4, 2 or 1) as keep the staged tile
    within 48 KB (the separable form spills registers in blocks of 8 rows)."""
    pad = cdiv(radius * channels, 4) * 4  # staged samples each side, whole float4s
    shapes = ((8, 4),) if radius <= 3 and not separable else ((4, 8), (2, 8), (1, 8))
    for block_y, out_y in shapes:
        rows = block_y * out_y + 2 * radius
        if rows * (32 * 4 + 2 * pad + 4) * 4 <= CONV3D_SMEM:
            break
    return {"BLOCK_X": 32, "BLOCK_Y": block_y, "OUT_X": 4, "OUT_Y": out_y,
            "ROWS_UNROLLED": int(radius <= 3)}


def _entry(stem: str, sample_bytes: int) -> str:
    return f"{stem}_u8" if sample_bytes == 1 else f"{stem}_u16"


def _floats(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, np.float32).ravel()
