"""Kernel variants: which one a stage runs as, and the launch each plans (no GPU needed)."""

from __future__ import annotations

import numpy as np
import pytest

import streamconv
from streamconv.backends import plan_kernels
from streamconv.backends.families import integer_taps
from streamconv.backends import plan as planning
from streamconv.backends.families import textbook
from streamconv.errors import FilterSpecError, SettingsError
from streamconv.chain.filters import FilterStage, parse_filter, validate_taps

from helpers.oracle import random_taps

SHAPES = [(1, 1, 3), (37, 1, 1), (1, 37, 4), (1080, 1920, 3), (2160, 3840, 3), (49, 65, 3)]
TENSOR_CORE_KS = (3, 5, 7, 9, 11, 15, 31)  # auto's tensor-core row


def random_stage(rng, size: int) -> FilterStage:
    return FilterStage("custom", {}, (validate_taps(random_taps(rng, size, exact=False)),))


@pytest.mark.parametrize("spec, expected", [
    ("gaussian:sigma=1", planning.SEPARABLE),       # 7x7, rank 1
    ("box:size=7", planning.SEPARABLE),
    ("box:size=5", planning.TENSOR_CORE),           # rank 1, but below SEPARABLE_FROM_K
    ("gaussian:sigma=0.833,size=5", planning.TENSOR_CORE),
    ("box:size=3", planning.TENSOR_CORE),           # one 3x3 matrix: conv3_tc.cu
    ("edge", planning.REGISTER_BLOCKED),            # a bank
    ("sharpen", planning.TENSOR_CORE),              # rank 2
    ("identity", planning.REGISTER_BLOCKED),
])
def test_auto_choice(spec, expected):
    assert planning.plan_stage(parse_filter(spec), planning.AUTO).variant == expected


def test_auto_keeps_full_rank_taps_2d(rng):
    assert planning.plan_stage(random_stage(rng, 15)).variant == planning.TENSOR_CORE
    assert planning.plan_stage(random_stage(rng, 15)).kernel_plan((64, 64, 3),
                                                                  2).source == "conv2d_tcp"
    assert planning.plan_stage(random_stage(rng, 3)).variant == planning.TENSOR_CORE
    # a bank above 9x9
    assert planning.plan_stage(_bank(rng, 15)).variant == planning.REGISTER_BLOCKED


@pytest.mark.parametrize("size", TENSOR_CORE_KS)
def test_auto_takes_the_tensor_cores_for_full_rank_taps_they_hold(rng, size):
    assert planning.plan_stage(random_stage(rng, size)).variant == planning.TENSOR_CORE
    assert planning.plan_stage(random_stage(rng, size),
                               dtype=np.uint16).variant == planning.REGISTER_BLOCKED
    # taps whose range no 3 int8 digits hold within half a step stay on the FP32 kernel
    wide = random_taps(rng, size, exact=False)
    wide[0, 0] = wide[-1, -1] = 1e6
    stage = FilterStage("custom", {}, (validate_taps(wide),))
    assert planning.plan_stage(stage).variant == planning.REGISTER_BLOCKED
    with pytest.raises(FilterSpecError, match="int8 digits"):
        planning.plan_stage(stage, planning.TENSOR_CORE).variant


def test_tensor_core_refuses_what_it_cannot_run(rng):
    with pytest.raises(FilterSpecError, match="bank of two taps up to K = 9"):
        planning.plan_stage(_bank(rng, 11), planning.TENSOR_CORE)
    with pytest.raises(SettingsError, match="8-bit frames only"):
        planning.plan_stage(random_stage(rng, 5), planning.TENSOR_CORE, np.uint16).variant
    assert not planning.supports(_bank(rng, 11), planning.TENSOR_CORE)
    assert planning.supports(random_stage(rng, 11), planning.TENSOR_CORE)
    assert planning.supports(random_stage(rng, 31), planning.TENSOR_CORE)


def _bank(rng, size: int) -> FilterStage:
    """Two banks of random taps combined as a gradient magnitude."""
    return FilterStage("custom", {}, tuple(random_stage(rng, size).taps[0] for _ in range(2)))


def test_tensor_core_plan_rounds_like_the_cpu_for_exact_taps(rng):
    exact = planning.plan_stage(parse_filter("sharpen"),
                                planning.TENSOR_CORE).kernel_plan((64, 64, 3), 2)
    assert exact.defines["TIES_EVEN"] == 1 and exact.defines["DIGITS"] == 1
    shift, bias = exact.constants["c_round"]
    assert bias == (1 << (shift - 1)) - 1
    inexact = planning.plan_stage(random_stage(rng, 5),
                                  planning.TENSOR_CORE).kernel_plan((64, 64, 3), 2)
    assert inexact.defines["TIES_EVEN"] == 0 and inexact.defines["DIGITS"] >= 2
    shift, bias = inexact.constants["c_round"]
    assert bias == 1 << (shift - 1)
    assert inexact.constants["g_bfrag"].dtype == np.uint32


def test_tensor_core_plan_takes_its_layout_per_size(rng):
    # 5 x 5: ldmatrix groups, units of two n-tiles; the fragments sized for that layout
    five = planning.plan_stage(random_stage(rng, 5),
                               planning.TENSOR_CORE).kernel_plan((64, 64, 3), 2)
    layout = integer_taps.kernel_layout(2, 3)
    assert five.defines["LDMATRIX"] == 1 and five.defines["GROUP"] == 2
    assert five.constants["g_bfrag"].size == five.defines["DIGITS"] * 2 * layout.steps * 2 * 32
    seven = planning.plan_stage(random_stage(rng, 7),
                                planning.TENSOR_CORE).kernel_plan((64, 64, 3), 2)
    assert seven.defines["LDMATRIX"] == 0 and seven.defines["GROUP"] == 1


@pytest.mark.parametrize("variant", planning.VARIANTS)
def test_an_explicit_variant_is_kept(variant):
    assert planning.plan_stage(parse_filter("gaussian:sigma=1"), variant).variant == variant


@pytest.mark.parametrize("spec", ["edge", "sharpen"])
def test_separable_is_refused_for_what_it_cannot_run(spec):
    with pytest.raises(FilterSpecError, match="--kernel separable"):
        planning.plan_stage(parse_filter(spec), planning.SEPARABLE).variant
    with pytest.raises(FilterSpecError, match="--kernel separable"):
        plan_kernels("separable", [parse_filter(spec)], "cuda")


def test_unknown_kernel_lists_the_known_ones():
    with pytest.raises(SettingsError,
                       match="known: auto, register-blocked, tensor-core, separable"):
        planning.check_kernel("fastest")


def test_cpu_backend_ignores_a_kernel_with_a_notice(caplog):
    plan_kernels("naive", [parse_filter("edge")], "cpu")
    assert "ignores it" in caplog.text
    with pytest.raises(SettingsError):
        plan_kernels("bogus", [parse_filter("edge")], "cpu")


def test_api_takes_a_kernel(rng):
    frame = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    with streamconv.Filter("box:size=3", backend="cpu", kernel="tiled") as blur:
        assert blur(frame).shape == frame.shape
    with pytest.raises(SettingsError):
        streamconv.StreamFilter("edge", backend="cpu", kernel="bogus")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("variant", planning.VARIANTS)
@pytest.mark.parametrize("size", [1, 3, 31])
def test_every_plan_covers_the_frame(variant, shape, size):
    height, width, channels = shape
    stage = parse_filter(f"box:size={size}")
    plan = planning.plan_stage(stage, variant).kernel_plan(shape, 2)
    assert plan.variant == variant
    defines = plan.defines
    assert (defines["RADIUS"], defines["CHANNELS"], defines["BORDER"]) == (size // 2, channels, 2)
    threads = plan.block[0] * plan.block[1] * plan.block[2]
    assert 32 <= threads <= 1024
    gx, gy, _ = plan.grid
    if variant == planning.REGISTER_BLOCKED:
        covered = (gx * plan.block[0] * defines["OUT_X"], gy * plan.block[1] * defines["OUT_Y"])
        assert covered[0] >= width * channels and covered[1] >= height
    elif variant == planning.SEPARABLE and plan.source == "sepconv_tc":
        span = 16 * defines["MT"] * defines["WARPS"]  # strips in x, block columns in y
        assert gy * span >= width * channels and gx * defines["STRIP_H"] >= height
        assert (gy - 1) * span < width * channels and (gx - 1) * defines["STRIP_H"] < height
        assert set(plan.constants) == {"g_arow", "g_acol", "c_round"}
    elif variant == planning.SEPARABLE:
        assert gx * defines["TILE_X"] >= width * channels and gy * defines["TILE_Y"] >= height
        assert set(plan.constants) == {"c_row", "c_col"}
    elif plan.source == "conv3_tc":
        span = 128 * defines["WARPS"]  # 128 bytes per warp
        assert gx * span >= width * channels and gy * defines["ROWS"] >= height
        assert (gx - 1) * span < width * channels and (gy - 1) * defines["ROWS"] < height
        assert threads == 32 * defines["WARPS"]
        assert set(plan.constants) == {"g_bband", "c_round"}
    elif plan.source == "conv2d_tcp":
        assert gx * defines["TILE_PX"] >= width and gy * defines["TILE_H"] >= height
        assert (gx - 1) * defines["TILE_PX"] < width and (gy - 1) * defines["TILE_H"] < height
        assert threads == 32 * defines["WARPS"]
        assert set(plan.constants) <= {"g_bfrag", "c_round", "c_sparse"}
    elif variant == planning.TENSOR_CORE:
        assert gx * defines["TILE_W"] >= width * channels and gy * defines["TILE_H"] >= height
        assert (gx - 1) * defines["TILE_W"] < width * channels and \
            (gy - 1) * defines["TILE_H"] < height
        assert threads == 32 * defines["WARPS"]
        assert set(plan.constants) == {"g_bfrag", "c_round"}
    else:
        per_block = {"tiled": defines["IN_TILE"] - 2 * defines["RADIUS"],
                     "cached-halo": defines["TILE"]}
        tile_x = per_block.get(variant, defines["BLOCK_X"])
        tile_y = per_block.get(variant,
                               defines["BLOCK_Y"] * (defines["COARSEN"] if variant == "coarsened"
                                                     else 1))
        assert gx * tile_x >= width and gy * tile_y >= height
        # a grid no larger than needed: one block less would not cover the frame
        assert (gx - 1) * tile_x < width and (gy - 1) * tile_y < height
    assert (plan.global_taps is not None) == (variant == "naive")
    assert plan.arguments in ("PPiiii", "PPiiiiP")


def test_textbook_variants_share_one_specialisation():
    stage = parse_filter("gaussian:sigma=1")
    defines = {planning.plan_stage(stage, v).kernel_plan((64, 64, 3), 0).label.split(" ", 1)[1]
               for v in textbook.ENTRIES}
    assert len(defines) == 1


def test_without_int8_tensor_cores_auto_keeps_to_the_fp32_kernels():
    """A GPU before sm_80 (Turing) has no int8 tensor-core mma: auto must pick kernels it can
    run."""
    import numpy as np

    from streamconv.backends.plan import plan_chain
    from streamconv.errors import SettingsError
    from streamconv.chain.filters import parse_chain

    rng = np.random.default_rng(5)
    big = ";".join(",".join(f"{v:.4f}" for v in row)
                   for row in np.outer(rng.uniform(1, 2, 15), rng.uniform(1, 2, 15)))
    chain = parse_chain(["box:size=5", "sharpen", "edge", f"custom:taps={big}"])
    with_tc = plan_chain(chain).kernel_plans((64, 64, 3), 2)
    # the case is a real one
    assert {"conv2d_tc", "conv3_tc", "sepconv_tc"} & {p.source for p in with_tc}
    without = plan_chain(chain, tensor_cores=False).kernel_plans((64, 64, 3), 2)
    assert all(p.math_unit == "FP32" and not p.source.endswith("_tc")
               for p in without), [p.source for p in without]
    with pytest.raises(SettingsError, match="sm_80"):
        plan_chain(chain[:1], "tensor-core", tensor_cores=False)
