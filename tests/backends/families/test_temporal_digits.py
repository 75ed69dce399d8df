"""The window's int8 digits for conv3d_tc.cu (backends/families/temporal.py), checked on the host:
one shift for every frame, the error bound over the whole window, exact taps kept exact, the
fragments frame after frame, and which kernel each stage gets."""

import numpy as np
import pytest

from streamconv.backends.families import integer_taps, temporal
from streamconv.backends.plan import plan_stage
from streamconv.chain.filters import FilterStage, parse_filter
from streamconv.chain.temporal import validate_taps3d


def conv3d(taps: np.ndarray) -> FilterStage:
    return FilterStage("conv3d", {}, (), temporal=validate_taps3d(taps))


def random_window(rng, frames: int, size: int) -> np.ndarray:
    taps = rng.normal(0.0, 1.0, (frames, size, size)) / (frames * size)
    taps[frames // 2, size // 2, size // 2] += 1.0
    return taps


@pytest.mark.parametrize("frames, size", [(3, 3), (5, 5), (9, 5), (15, 9)])
def test_the_bound_holds_over_the_whole_window(rng, frames, size):
    taps = random_window(rng, frames, size).astype(np.float32).astype(np.float64)
    digits = temporal.window_digits(taps)
    assert digits is not None and digits.values.shape == (frames, size, size)
    error = 255 * np.abs(taps - digits.values / 2.0**digits.shift).sum()
    assert error == pytest.approx(digits.error) and error <= integer_taps.MAX_QUANT_ERROR
    assert 255 * np.abs(digits.values).sum() <= integer_taps.INT32_MAX


def test_exact_taps_stay_exact(rng):
    taps = rng.integers(-40, 80, (5, 5, 5)) / 256.0
    taps *= 1.0 / max(1.0, 255 * np.abs(taps).sum() / 65536)
    taps = np.round(taps * 256) / 256
    digits = temporal.window_digits(taps)
    assert digits is not None and digits.error == 0
    np.testing.assert_array_equal(digits.values / 2.0**digits.shift, taps)


def test_fragments_are_each_frames_band_in_turn(rng):
    """g_bfrag holds frame k's fragments at block k: the 2-D table of that frame's digits."""
    taps = random_window(rng, 3, 5)
    stage = conv3d(taps)
    launch = plan_stage(stage).kernel_plan((40, 64, 3), 2)
    assert launch.source == "conv3d_tc" and launch.defines["TAPS"] == 3
    digits = temporal.window_digits(stage.temporal.taps[list(stage.temporal.used)])
    assert digits is not None
    layout = integer_taps.kernel_layout(2, 3)
    table = launch.constants["g_bfrag"].reshape(3, -1)
    for k in range(3):
        alone = integer_taps.IntegerTaps(digits.values[k:k + 1], digits.shift, digits.digits, 0.0)
        np.testing.assert_array_equal(table[k], integer_taps.fragment_table(alone, layout).ravel())
    np.testing.assert_array_equal(launch.constants["c_round"],
                                  [digits.shift, (1 << (digits.shift - 1)) - (digits.error == 0)])


@pytest.mark.parametrize("spec, dtype, tensor_cores, source", [
    ("conv3d:taps=1,2,1;2,4,2;1,2,1|0,1,0;1,1,1;0,1,0|1,0,1;0,2,0;1,0,1", np.uint8, True,
     "conv3d_tc"),
    ("tdenoise", np.uint8, True, "conv3d"),  # taps that factor: time, then space
    ("conv3d:taps=1,2,1;2,4,2;1,2,1|0,1,0;1,1,1;0,1,0|1,0,1;0,2,0;1,0,1", np.uint16, True,
     "conv3d"),
    ("conv3d:taps=1,2,1;2,4,2;1,2,1|0,1,0;1,1,1;0,1,0|1,0,1;0,2,0;1,0,1", np.uint8, False,
     "conv3d"),
    ("tmean:frames=5", np.uint8, True, "temporal"),
])
def test_which_kernel_runs_a_stage(spec, dtype, tensor_cores, source):
    stage = parse_filter(spec)
    launch = plan_stage(stage, dtype=dtype, tensor_cores=tensor_cores).kernel_plan((48, 64, 3), 1)
    assert launch.source == source


def test_k_above_9_runs_in_float32(rng):
    stage = conv3d(random_window(rng, 3, 11))
    assert plan_stage(stage).kernel_plan((48, 64, 3), 1).source == "conv3d"
