"""The tensor-core separable kernel's host side (backends/separable_tc.py), checked on the host by
emulating both of its mma passes in NumPy, and its choice of taps."""

import numpy as np
import pytest

from streamconv.backends import plan as planning
from streamconv.backends.families import separable_tc
from streamconv.backends.families.rank1 import SeparableTaps, factor_separable
from streamconv.chain.filters import parse_filter


def unpack(fragments: np.ndarray) -> np.ndarray:
    """The (16, 32) int8 matrix whose A registers ``fragments`` (4, 32) are."""
    matrix = np.zeros((16, 32), np.int64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg, (row, k0) in enumerate(((g, 4 * t), (g + 8, 4 * t), (g, 16 + 4 * t),
                                         (g + 8, 16 + 4 * t))):
            for e in range(4):
                byte = int(fragments[reg, lane]) >> (8 * e) & 255
                matrix[row, k0 + e] = byte - 256 if byte > 127 else byte
    return matrix


def form(spec: str, channels: int):
    stage = parse_filter(spec)
    return stage, separable_tc.plan(factor_separable(stage.taps[0]), stage.radius, channels)


@pytest.mark.parametrize("spec", ["gaussian:sigma=5.2,size=31", "gaussian:sigma=2", "box:size=15",
                                  "gaussian:sigma=1.3,size=9"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_row_pass_fragments_give_the_integer_row_correlation(spec, channels, rng):
    stage, fast = form(spec, channels)
    assert fast is not None
    radius, left = stage.radius, separable_tc.left_bytes(stage.radius, channels)
    chunks = separable_tc.row_chunks(stage.radius, channels)
    window = rng.integers(0, 256, (8, 32 * chunks)).astype(np.int64)  # 8 rows of the staged window
    mids = np.zeros((16, 8), np.int64)  # m-tile row m x frame row
    for c in range(chunks):
        for d in range(2):
            mids += 256**d * (unpack(fast.arow[c, d]) @ window[:, 32 * c:32 * c + 32].T)
    want = np.zeros_like(mids)
    for m in range(16):
        for n in range(2 * radius + 1):
            want[m] += fast.row[n] * window[:,
                                            left + separable_tc.sigma(m) + (n - radius) * channels]
    np.testing.assert_array_equal(mids, want)


@pytest.mark.parametrize("spec", ["gaussian:sigma=5.2,size=31", "gaussian:sigma=2", "box:size=7"])
def test_column_pass_fragments_give_the_integer_column_correlation(spec, rng):
    stage, fast = form(spec, 3)
    mid = rng.integers(0, 256, 48).astype(np.int64)  # mid rows -16 .. 31 of one byte column
    sums = np.zeros(16, np.int64)
    for c in range(2):
        b = np.array([0 if (r := separable_tc.column_mid_row(c, k)) is None else mid[r + 16]
                      for k in range(32)])
        for d in range(2):
            sums += 256**d * (unpack(fast.acol[c, d]) @ b)
    radius = stage.radius
    want = [sum(fast.column[j] * mid[r + j - radius + 16] for j in range(2 * radius + 1))
            for r in range(16)]
    np.testing.assert_array_equal(sums, want)


def test_sigma_gives_each_lane_four_adjacent_bytes():
    assert sorted(separable_tc.sigma(m) for m in range(16)) == list(range(16))
    for t in range(4):  # output n-tiles 0 and 1, columns 2t and 2t + 1
        cols = [separable_tc.sigma(2 * t), separable_tc.sigma(2 * t + 1),
                separable_tc.sigma(8 + 2 * t), separable_tc.sigma(9 + 2 * t)]
        assert cols == [4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3]


def test_the_error_bound_keeps_outputs_within_one_step():
    _, gaussian = form("gaussian:sigma=5.2,size=31", 3)
    assert 0.5 <= gaussian.error < separable_tc.MAX_ERROR
    # rows of both signs cannot be held as bytes between the passes
    taps = np.outer([1.0, 2.0, 1.0], [-1.0, 0.0, 1.0]) / 8
    assert separable_tc.plan(factor_separable(taps), 1, 3) is None
    # column taps that sum to more than 1.5 in magnitude make the rounded mid too coarse
    loud = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0]) / 2
    assert separable_tc.plan(factor_separable(loud), 1, 3) is None
    # taps too large for two digits at any shift from 1, and zero taps
    huge = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0]) * 1e5
    assert separable_tc.plan(factor_separable(huge), 1, 3) is None
    zero = SeparableTaps(row=np.zeros(3, np.float32), column=np.ones(3, np.float32), exact=False)
    assert separable_tc.plan(zero, 1, 3) is None


def test_the_separable_plan_takes_the_tensor_cores_for_inexact_taps():
    plan = planning.plan_stage(parse_filter("gaussian:sigma=3"),
                               planning.SEPARABLE).kernel_plan((64, 64, 3), 2)
    assert plan.source == "sepconv_tc" and plan.constants["g_arow"].dtype == np.uint32
    assert plan.block == (32 * separable_tc.WARPS, 1, 1)
    # exact taps keep sepconv.cu, whose output is byte for byte the 2D kernel's
    binomial = np.outer([1, 4, 6, 4, 1, 0, 0], [1, 4, 6, 4, 1, 0, 0]) / 256
    from streamconv.chain.filters import FilterStage, validate_taps
    exact = FilterStage("custom", {}, (validate_taps(binomial),))
    assert planning.plan_stage(exact, planning.SEPARABLE).kernel_plan((64, 64, 3),
                                                                      2).source == "sepconv"
    small = planning.plan_stage(parse_filter("gaussian:sigma=2"),
                                planning.SEPARABLE).kernel_plan((64, 64, 3), 2)
    assert small.source == "sepconv"  # 13 x 13, below TENSOR_SEPARABLE_FROM_K
