"""When conv2d.cu may widen bytes to 2^15 + byte (OFFSET_CVT), checked by emulating its float32
sums in NumPy: exact taps must stay bit-exact, other taps within half an output step."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.oracle import exact_for, random_taps
from streamconv.backends import plan as planning
from streamconv.backends.families import register_blocked
from streamconv.chain.filters import FilterStage, parse_filter, validate_taps


def offset_sums(taps: np.ndarray, windows: np.ndarray, offset: float) -> np.ndarray:
    """What OFFSET_CVT computes: float32 sums of taps x (2^15 + byte), started at -offset, one
    rounding per term (the kernel's FMA; the float64 product is exact).

    Args:
        taps: (K, K) float taps. windows: (N, K, K) uint8 input windows. offset: c_offset.
    Returns:
        (N,) float64 sums.
    """
    flat_taps = np.asarray(taps, np.float32).astype(np.float64).ravel()
    values = windows.reshape(len(windows),
                             -1).astype(np.float64) + register_blocked.CONVERSION_OFFSET
    acc = np.full(len(windows), -offset, np.float32)
    for i, tap in enumerate(flat_taps):
        acc = (tap * values[:, i] + acc.astype(np.float64)).astype(np.float32)
    return acc.astype(np.float64)


def exact_sums(taps: np.ndarray, windows: np.ndarray) -> np.ndarray:
    flat_taps = np.asarray(taps, np.float32).astype(np.float64).ravel()
    return windows.reshape(len(windows), -1).astype(np.float64) @ flat_taps


def windows_for(rng: np.random.Generator, size: int, taps: np.ndarray) -> np.ndarray:
    """Random windows plus the extremes: all 0, all 255, and 255 where a tap is positive
    (largest sum) or negative (smallest)."""
    random = rng.integers(0, 256, (2000, size, size), dtype=np.uint8)
    extremes = np.stack([np.zeros((size, size)), np.full((size, size), 255),
                         np.where(taps > 0, 255, 0), np.where(taps < 0, 255, 0)]).astype(np.uint8)
    return np.concatenate([random, extremes])


def named_taps(name: str) -> list[np.ndarray]:
    return list(parse_filter(name).taps)


@pytest.mark.parametrize("name",
                         ["identity", "sharpen", "emboss", "edge", "box", "gaussian:sigma=1"])
def test_named_filters_take_the_offset_and_exact_ones_stay_exact(name):
    rng = np.random.default_rng(3)
    banks = named_taps(name)
    offsets = register_blocked.conversion_offsets(banks)
    assert offsets is not None, "every named filter is cheap enough to take the offset"
    for taps, offset in zip(banks, offsets):
        assert offset == np.float32(register_blocked.CONVERSION_OFFSET * np.asarray(
            taps, np.float32).astype(np.float64).sum())
        windows = windows_for(rng, taps.shape[0], taps)
        got, want = offset_sums(taps, windows, float(offset)), exact_sums(taps, windows)
        if exact_for(taps, 255):
            np.testing.assert_array_equal(got, want, err_msg=f"{name}: exact taps must sum exactly")
        else:
            assert np.abs(got - want).max() <= register_blocked.MAX_OFFSET_ERROR


@pytest.mark.parametrize("size", [3, 5, 7, 9])
@pytest.mark.parametrize("seed", range(6))
def test_random_taps_take_the_offset_only_within_half_a_step(size, seed):
    rng = np.random.default_rng(seed)
    for exact in (False, True):
        taps = random_taps(rng, size, exact=exact) * rng.uniform(0.2, 3.0)
        offsets = register_blocked.conversion_offsets([taps])
        if offsets is None:
            continue
        windows = windows_for(rng, size, taps)
        error = np.abs(offset_sums(taps, windows, float(offsets[0])) - exact_sums(taps, windows))
        if exact and exact_for(taps, 255):
            assert error.max() == 0, "the plain conversion is exact here, so the offset must be too"
        assert error.max() <= register_blocked.MAX_OFFSET_ERROR


def test_the_offset_is_refused_where_it_would_cost_exactness_or_precision():
    # Multiples of 1/256 summing (in magnitude) to 3: exact with plain bytes, not with 2^15 + byte.
    exact = np.zeros((3, 3))
    exact[1, 1], exact[0, 0], exact[2, 2] = 1.0, 1.0, -1.0 + 1 / 256
    assert exact_for(exact, 255) and register_blocked.conversion_offsets([exact]) is None
    # Large random taps: the rounding bound passes half a step.
    wide = random_taps(np.random.default_rng(0), 15, exact=False)
    assert register_blocked.conversion_offsets([wide]) is None
    # 16-bit samples have no offset form.
    assert register_blocked.conversion_offsets(named_taps("sharpen"), elem_bytes=2) is None


def test_the_register_blocked_plan_carries_the_offset_only_when_chosen():
    sharpen = parse_filter("sharpen")
    plan = planning.plan_stage(sharpen, "register-blocked").kernel_plan((1080, 1920, 3), 2)
    assert plan.defines["OFFSET_CVT"] == 1
    np.testing.assert_array_equal(plan.constants["c_offset"],
                                  register_blocked.conversion_offsets(sharpen.taps))
    wide = FilterStage("custom", {},
                       (validate_taps(random_taps(np.random.default_rng(0), 15, exact=False)),))
    plan = planning.plan_stage(wide, "register-blocked").kernel_plan((1080, 1920, 3), 2)
    assert "OFFSET_CVT" not in plan.defines and "c_offset" not in plan.constants
    deep = planning.plan_stage(sharpen, "register-blocked",
                               np.uint16).kernel_plan((1080, 1920, 3), 2)
    assert "OFFSET_CVT" not in deep.defines
