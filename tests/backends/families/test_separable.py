"""Rank-1 detection and the separable factors, on the CPU: a float32 emulation of the row
pass then the column pass (sepconv.cu's arithmetic) against the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

import streamconv
from streamconv.backends import create_backend, plan_kernels
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.backends.families.rank1 import factor_separable
from streamconv.frames.borders import BORDER_MODES, pad_frame
from streamconv.errors import FilterSpecError
from streamconv.chain.filters import (FilterStage, build_filter, parse_chain, parse_filter,
                                      validate_taps)

from helpers.oracle import random_taps, reference_filter

BINOMIAL5 = np.array([1, 4, 6, 4, 1], np.float64)


def separable_emulation(frame: np.ndarray, row: np.ndarray, column: np.ndarray,
                        border: str) -> np.ndarray:
    """Row pass then column pass in float32, taps applied in index order, as sepconv.cu does."""
    size = row.shape[0]
    padded = pad_frame(frame, size // 2, border).astype(np.float32)
    height, width = frame.shape[:2]
    mid = np.zeros((padded.shape[0], width, frame.shape[2]), np.float32)
    for n in range(size):
        mid = mid + np.float32(row[n]) * padded[:, n:n + width]
    out = np.zeros(frame.shape, np.float32)
    for m in range(size):
        out = out + np.float32(column[m]) * mid[m:m + height]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def stage_of(taps) -> FilterStage:
    return FilterStage("custom", {}, (validate_taps(taps),))


@pytest.mark.parametrize("spec",
                         ["box:size=5", "box:size=31", "gaussian:sigma=1",
                          "gaussian:sigma=4,size=31",
                                  "identity", "sobel-x", "emboss"])
def test_rank_one_filters_are_found(spec):
    stage = parse_filter(spec)
    factors = factor_separable(stage.taps[0])
    if spec == "emboss":  # [[-2,-1,0],[-1,1,1],[0,1,2]] has full rank
        assert factors is None
        return
    assert factors is not None
    rebuilt = np.outer(factors.column.astype(np.float64), factors.row.astype(np.float64))
    np.testing.assert_allclose(rebuilt, stage.taps[0], rtol=0,
                               atol=1e-6 * np.abs(stage.taps[0]).max())


@pytest.mark.parametrize("size", [3, 5, 9, 31])
def test_full_rank_taps_are_not_separable(rng, size):
    assert factor_separable(random_taps(rng, size, exact=False)) is None
    assert factor_separable(random_taps(rng, size, exact=True)) is None


def test_degenerate_matrices_are_not_separable():
    assert factor_separable(np.zeros((3, 3), np.float32)) is None
    taps = np.ones((3, 3), np.float32)
    taps[1, 1] = np.nan
    assert factor_separable(taps) is None
    assert factor_separable(np.ones((3, 5), np.float32)) is None


def test_sharpen_is_rank_two():
    assert factor_separable(build_filter("sharpen", {"amount": 1.0}).taps[0]) is None


def test_exact_taps_get_exact_factors():
    taps = np.outer(BINOMIAL5, -BINOMIAL5[::-1] * np.array([1, 0, 1, 0, 1])) / 256
    factors = factor_separable(taps.astype(np.float32))
    assert factors is not None and factors.exact
    np.testing.assert_array_equal(np.outer(factors.column.astype(np.float64), factors.row), taps)
    assert np.array_equal(factors.row, np.round(factors.row))  # integer row taps: exact row sums


def test_exact_taps_beyond_the_exactness_bound_use_the_float_factors():
    taps = np.full((5, 5), 16.0, np.float32)  # 255 * 400 > 2^16: the 2D sums are not exact either
    factors = factor_separable(taps)
    assert factors is not None and not factors.exact


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("height, width", [(1, 1), (1, 23), (23, 1), (31, 47)])
def test_exact_factors_give_the_2d_output_byte_for_byte(rng, border, height, width):
    taps = (np.outer(BINOMIAL5, BINOMIAL5) / 256).astype(np.float32)
    stage = stage_of(taps)
    factors = factor_separable(taps)
    assert factors.exact
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    expected = CpuBackend([stage], border=border).apply(frame)
    np.testing.assert_array_equal(separable_emulation(frame, factors.row, factors.column, border),
                                  expected)


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("spec", ["gaussian:sigma=1.3", "box:size=7", "gaussian:sigma=5,size=31"])
def test_float_factors_stay_within_one_lsb_of_2d(rng, border, spec):
    stage = parse_filter(spec)
    factors = factor_separable(stage.taps[0])
    assert factors is not None and not factors.exact
    frame = rng.integers(0, 256, (40, 53, 3), dtype=np.uint8)
    expected = CpuBackend([stage], border=border).apply(frame)
    got = separable_emulation(frame, factors.row, factors.column, border)
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("spec", ["gaussian:sigma=2", "gaussian:sigma=1", "box:size=9", "sobel-x"])
def test_cpu_separable_kernel_stays_within_one_of_the_reference(rng, spec, dtype):
    stage = parse_filter(spec) if ":" in spec else build_filter(spec)
    frame = rng.integers(0, np.iinfo(dtype).max + 1, (41, 57, 3), dtype=dtype)
    for border in BORDER_MODES:
        out = np.full_like(frame, 0xA5)
        CpuBackend([stage], border=border, kernel="separable").apply_into(out, frame)
        reference = CpuBackend([stage], border=border).apply(frame)
        assert np.abs(out.astype(int) - reference).max() <= 1
        assert np.abs(out.astype(int) - reference_filter(frame, stage, border)).max() <= 1


def test_cpu_separable_kernel_is_exact_for_exact_factors(rng):
    stage = stage_of((np.outer(BINOMIAL5, BINOMIAL5) / 256).astype(np.float32))
    frame = rng.integers(0, 256, (37, 45, 3), dtype=np.uint8)
    for border in BORDER_MODES:
        fast = CpuBackend([stage], border=border, kernel="separable")
        np.testing.assert_array_equal(fast.apply(frame),
                                      CpuBackend([stage], border=border).apply(frame))


def test_cpu_separable_kernel_refuses_what_is_not_rank_one():
    with pytest.raises(FilterSpecError, match="not rank 1"):
        CpuBackend([parse_filter("sharpen")], kernel="separable")
    with pytest.raises(FilterSpecError, match="bank"):
        CpuBackend([build_filter("edge")], kernel="separable")
    with pytest.raises(FilterSpecError, match="not rank 1"):  # the CLI's check, before any work
        plan_kernels("separable", [parse_filter("sharpen")], "cpu")
    CpuBackend([parse_filter("sharpen")], kernel="tensor-core")  # a cuda kernel: the reference runs


def test_cpu_separable_kernel_runs_the_2d_stages_of_a_chain_across_frames(rng):
    """A stage across frames runs its own taps whatever the kernel (tdenoise's are not rank 1),
    the 2-D stages around it take separable, within 1 of the reference."""
    chain = parse_chain(["gaussian:sigma=2", "tdenoise:frames=3", "box:size=9"])
    assert plan_kernels("separable", chain, "cpu") is None
    assert "separable" in create_backend("cpu", chain, kernel="separable").describe()
    clip = rng.integers(0, 256, (5, 23, 31, 3), dtype=np.uint8)
    outputs = {}
    for kernel in ("auto", "separable"):
        with streamconv.StreamFilter(chain, backend="cpu", kernel=kernel) as stream:
            outputs[kernel] = np.stack([out.copy() for out in stream.map(clip)])
    assert outputs["separable"].shape == clip.shape
    assert np.abs(outputs["separable"].astype(int) - outputs["auto"]).max() <= 1
