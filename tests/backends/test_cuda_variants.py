"""Every CUDA kernel variant against the CPU oracle, and the separable path against the 2D one.

Fresh random frames, outputs poisoned on the device and the host first (gpu_check.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.backends import plan as planning
from streamconv.frames.borders import BORDER_MODES
from streamconv.errors import FilterSpecError
from streamconv.chain.filters import FilterStage, build_filter, parse_filter, validate_taps

from helpers.gpu_check import check_against_cpu, gpu_filter, precompile_plans
from helpers.oracle import random_taps

pytestmark = pytest.mark.cuda

TWO_D = [v for v in planning.VARIANTS if v != planning.SEPARABLE]
KS = [1, 3, 5, 15, 31]
FRAMES = [(1, 1), (1, 37), (29, 1), (23, 37)]


def full_rank_stage(rng, size: int, exact: bool) -> FilterStage:
    return FilterStage("custom", {}, (validate_taps(random_taps(rng, size, exact=exact)),))


def exact_rank_one_stage(rng, size: int) -> FilterStage:
    """outer(u, v) / 256 for small random integers u, v (negatives too): exact, rank 1."""
    u, v = rng.integers(-2, 3, size), rng.integers(-2, 3, size)
    u[size // 2], v[size // 2] = 3, 3  # never all zero
    return FilterStage("custom", {}, (validate_taps(np.outer(u, v) / 256.0),))


def gaussian_stage(size: int) -> FilterStage:
    return parse_filter(f"gaussian:sigma={size / 6},size={size}")


@pytest.fixture(scope="module")
def gpu():
    rng = np.random.default_rng(0)
    wanted = [(full_rank_stage(rng, k, False), (64, 64, 3), b) for k in KS for b in range(3)]
    wanted += [(build_filter("edge"), (64, 64, c), b) for c in (1, 4) for b in range(3)]
    wanted += [(gaussian_stage(k), (64, 64, c), b) for k in (*KS, 21) for c in (1, 3, 4)
               for b in range(3)]
    wanted += [(parse_filter(f"box:size={k}"), (64, 64, c), b) for k in (15, 21, 31)
               for c in (1, 3, 4)
               for b in range(3)]
    wanted += [(stage, (64, 64, c), b) for k in (3, 7, 9) for c in (1, 3, 4) for b in range(3)
               for stage in (full_rank_stage(rng, k, True), full_rank_stage(rng, k, False),
                             three_digit_stage(rng, k))]
    wanted += [(stage, (64, 64, c), b) for k in LARGE_KS for c in (1, 3, 4) for b in range(3)
               for stage in large_k_stages(rng, k)]
    return precompile_plans(wanted, "all")


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("size", KS)
@pytest.mark.parametrize("variant", TWO_D)
def test_2d_variants_on_random_taps(rng, gpu, variant, size, border):
    for exact in (True, False):
        stage = full_rank_stage(rng, size, exact)
        for height, width in FRAMES:
            frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            check_against_cpu([stage], frame, border, gpu, variant)


def three_digit_stage(rng, size: int) -> FilterStage:
    """Random taps whose 2-digit form would miss by more than integer_taps.MAX_QUANT_ERROR."""
    from streamconv.backends.families import integer_taps

    while True:
        taps = random_taps(rng, size, exact=False) * 3
        if size == 3:  # nine taps fit two digits unless their range is wide; a +-40 pair keeps
            taps[1, 0] += 40.0  # the outputs where the two bytes nearly agree unsaturated
            taps[1, 2] -= 40.0
        stage = FilterStage("custom", {}, (validate_taps(taps),))
        taps = integer_taps.quantize(stage.taps)
        if taps is not None and taps.digits == 3:
            return stage


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("size", [3, 7, 9])  # 3: conv3_tc.cu
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_tensor_core_at_every_size_it_takes(rng, gpu, size, border, channels):
    stages = [full_rank_stage(rng, size, True), full_rank_stage(rng, size, False),
              three_digit_stage(rng, size)]
    # Rows of 128 x k bytes plus a few (1, 3 and 4 channels): the row's end in a warp's last group.
    row_ends = [(6, 130), (5, 43), (4, 33)]
    for stage in stages:
        for height, width in [*FRAMES, (67, 93), *row_ends]:
            frame = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
            check_against_cpu([stage], frame, border, gpu, planning.TENSOR_CORE)


LARGE_KS = [11, 15, 21, 31]


def large_k_stages(rng, size: int) -> list[FilterStage]:
    """conv2d_tcp.cu's cases: exact taps, inexact ones (a top digit on the centre: the sparse
    list), and small taps of equal size (a blur: two dense digits, no list)."""
    blur = rng.uniform(0.0, 1.0, (size, size))
    return [full_rank_stage(rng, size, True), full_rank_stage(rng, size, False),
            FilterStage("custom", {}, (validate_taps(blur / blur.sum()),))]


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("size", LARGE_KS)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_tensor_core_at_large_k(rng, gpu, size, border, channels):
    # tiles of 64 x 32 pixels: frames below one, across several, and rows ending mid-vector
    for stage in large_k_stages(rng, size):
        assert planning.plan_stage(stage, planning.TENSOR_CORE).kernel_plan((8, 8, channels),
                                                                            0).source == "conv2d_tcp"
        for height, width in [*FRAMES, (67, 93), (33, 130), (5, 43)]:
            frame = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
            check_against_cpu([stage], frame, border, gpu, planning.TENSOR_CORE)


def test_tensor_core_at_4k_and_on_named_filters(rng, gpu):
    frame = rng.integers(0, 256, (2160, 3840, 3), dtype=np.uint8)
    for size in (5, 15, 31):
        check_against_cpu([full_rank_stage(rng, size, False)], frame, "reflect101", gpu,
                          planning.TENSOR_CORE)
    small = frame[:131, :257]
    for spec in ("sharpen", "emboss", "identity", "box:size=3", "box:size=9", "gaussian:sigma=1.3"):
        check_against_cpu([parse_filter(spec)], small, "replicate", gpu, planning.TENSOR_CORE)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("variant", TWO_D)
def test_2d_variants_on_a_bank_and_channel_counts(rng, gpu, variant, channels):
    frame = rng.integers(0, 256, (45, 71, channels), dtype=np.uint8)
    for border in BORDER_MODES:
        check_against_cpu([build_filter("edge")], frame, border, gpu, variant)
        check_against_cpu([gaussian_stage(5)], frame, border, gpu, variant)


@pytest.mark.parametrize("variant", TWO_D)
def test_2d_variants_at_1080p(rng, gpu, variant):
    frame = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    check_against_cpu([full_rank_stage(rng, 5, False)], frame, "reflect101", gpu, variant)


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("size", KS)
def test_separable_matches_the_oracle_and_the_2d_kernel(rng, gpu, size, border):
    for stage in (gaussian_stage(size), exact_rank_one_stage(rng, size)):
        for height, width in [*FRAMES, (67, 93)]:
            frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            separable = check_against_cpu([stage], frame, border, gpu, planning.SEPARABLE)
            two_d = gpu_filter([stage], frame, border, gpu, planning.REGISTER_BLOCKED)
            difference = np.abs(separable.astype(int) - two_d.astype(int))
            assert difference.max() <= 1
            if stage.name == "custom":  # exact factors: byte for byte
                np.testing.assert_array_equal(separable, two_d)


@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("size", [3, 15])
def test_separable_one_and_four_channels(rng, gpu, size, channels):
    frame = rng.integers(0, 256, (61, 83, channels), dtype=np.uint8)
    for border in BORDER_MODES:
        check_against_cpu([gaussian_stage(size)], frame, border, gpu, planning.SEPARABLE)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("size", [15, 21, 31])
def test_separable_on_the_tensor_cores(rng, gpu, size, channels):
    for stage in (gaussian_stage(size), parse_filter(f"box:size={size}")):
        plan = planning.plan_stage(stage, planning.SEPARABLE).kernel_plan((64, 64, channels), 2)
        assert plan.source == "sepconv_tc"
        for border in BORDER_MODES:
            for height, width in [*FRAMES, (67, 93), (150, 301)]:
                frame = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
                check_against_cpu([stage], frame, border, gpu, planning.SEPARABLE)


@pytest.mark.parametrize("height, width", [(1080, 1920), (2160, 3840)])
def test_separable_full_frames(rng, gpu, height, width):
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    for size in (5, 31):
        check_against_cpu([gaussian_stage(size)], frame, "reflect101", gpu, planning.SEPARABLE)
    check_against_cpu([exact_rank_one_stage(rng, 9)], frame, "zero", gpu, planning.SEPARABLE)


def test_auto_runs_rank_one_taps_separable(gpu):
    from streamconv.backends.cuda.backend import CudaBackend

    chain = [gaussian_stage(9), build_filter("edge"), gaussian_stage(3)]
    with CudaBackend(chain) as backend:
        ran = [plan.variant for plan, _ in backend.compiled_stages((64, 80, 3))]
    # 3x3: conv3_tc.cu
    assert ran == [planning.SEPARABLE, planning.REGISTER_BLOCKED, planning.TENSOR_CORE]


def test_separable_is_refused_before_any_gpu_work(gpu):
    from streamconv.backends.cuda.backend import CudaBackend

    with pytest.raises(FilterSpecError, match="not rank 1"):
        CudaBackend([parse_filter("sharpen")], kernel=planning.SEPARABLE)


def test_a_chain_mixing_variants(rng, gpu):
    # Exact taps throughout, so every stage must match byte for byte (a 1-LSB rounding
    # difference in a first Gaussian stage would be magnified by the edge stage after it).
    chain = [exact_rank_one_stage(rng, 7), build_filter("edge"), parse_filter("sharpen")]
    frame = rng.integers(0, 256, (123, 211, 3), dtype=np.uint8)
    for variant in ("naive", "tiled", "auto"):
        check_against_cpu(chain, frame, "replicate", gpu, variant)
