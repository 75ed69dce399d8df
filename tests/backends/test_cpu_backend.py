"""The CPU backend against the float64 NumPy oracle: every filter, border, odd size and chain."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.frames.borders import BORDER_MODES, pad_frame
from streamconv.errors import FrameFormatError, FrameTypeError
from streamconv.chain.filters import (REGISTRY, build_filter, parse_filter, validate_taps,
                                      FilterStage)
from streamconv.chain.temporal import TEMPORAL_NAMES

from helpers.oracle import random_taps, reference_chain, reference_filter

SIZES = [(1, 1), (1, 17), (17, 1), (49, 65), (4, 5)]
# scale and crop (the geometry stages) have tests of their own: test_resample.py
NAMED = [name for name in REGISTRY
         if name not in ("custom", "bank", "scale", "crop", *TEMPORAL_NAMES)]
NAMED += ["custom:taps=0,-1,0;-1,5,-1;0,-1,0"]


def _stage(spec: str):
    return parse_filter(spec) if ":" in spec else build_filter(spec)


def _poisoned_output(frame: np.ndarray) -> np.ndarray:
    return np.full_like(frame, 0xA5)


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("height, width", SIZES)
@pytest.mark.parametrize("spec", NAMED)
def test_named_filter_matches_reference(rng, spec, border, height, width):
    stage = _stage(spec)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = _poisoned_output(frame)
    CpuBackend([stage], border=border).apply_into(out, frame)
    expected = reference_filter(frame, stage, border)
    assert np.abs(out.astype(int) - expected).max() <= 1
    if all(np.all(t * 256 == np.round(t * 256)) for t in stage.taps):
        np.testing.assert_array_equal(out, expected)  # exact where every tap is a multiple of 1/256


@pytest.mark.parametrize("size", [1, 3, 5, 7, 9, 13, 21, 31])
@pytest.mark.parametrize("border", BORDER_MODES)
def test_random_taps_exact_multiples_of_1_256(rng, size, border):
    taps = random_taps(rng, size, exact=True)
    stage = FilterStage("custom", {}, (validate_taps(taps),))
    frame = rng.integers(0, 256, (23, 37, 3), dtype=np.uint8)
    out = _poisoned_output(frame)
    CpuBackend([stage], border=border).apply_into(out, frame)
    np.testing.assert_array_equal(out, reference_filter(frame, stage, border))


@pytest.mark.parametrize("size", [3, 9, 15, 31])
def test_random_float_taps_within_one_lsb(rng, size):
    stage = FilterStage("custom", {}, (validate_taps(random_taps(rng, size, exact=False)),))
    frame = rng.integers(0, 256, (40, 33, 3), dtype=np.uint8)
    for border in BORDER_MODES:
        out = CpuBackend([stage], border=border).apply(frame)
        assert np.abs(out.astype(int) - reference_filter(frame, stage, border)).max() <= 1


def definition_filter(frame: np.ndarray, stage, border: str) -> np.ndarray:
    """The computation that defines the CPU backend's bytes, written out plainly: the frame
    padded in float32, cv2.filter2D of the taps (area <= 49) or the sum of the 1 x K rows'
    filter2D in row order, the magnitude of a bank, np.rint, saturation."""
    height, width, _ = frame.shape
    radius = stage.radius
    padded = pad_frame(frame, radius, border)
    sums = []
    for taps in stage.taps:
        taps = np.asarray(taps, np.float32)
        rows = [taps] if taps.size <= 49 else [taps[m:m + 1] for m in range(taps.shape[0])]
        total = None
        for offset, part in enumerate(rows):
            band = padded if len(rows) == 1 else padded[offset:offset + height]
            line = cv2.filter2D(band, cv2.CV_32F, part, borderType=cv2.BORDER_CONSTANT)
            line = line.reshape(band.shape)[radius if len(rows) == 1 else 0:][:height]
            line = line[:, radius:radius + width]
            total = line.copy() if total is None else total + line
        sums.append(total)
    acc = np.sqrt(sums[0] * sums[0] + sums[1] * sums[1]) if len(sums) == 2 else sums[0]
    return np.clip(np.rint(acc), 0, np.iinfo(frame.dtype).max).astype(frame.dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("spec", ["box:size=9", "box:size=15", "gaussian:sigma=2",
                                  "gaussian:sigma=1", "edge", "sharpen:amount=0.7", "random9",
                                  "random5", "exact9"])
def test_output_is_the_defining_computation_byte_for_byte(rng, spec, dtype):
    if spec == "exact9":  # rank 1 with exact factors: runs as a row and a column pass
        factor = np.array([1, 1, 2, 2, 4, 2, 2, 1, 1])
        stage = FilterStage("custom", {}, (validate_taps(np.outer(factor, factor) / 256),))
    elif spec.startswith("random"):
        size = int(spec[6:])
        stage = FilterStage("custom", {}, (validate_taps(random_taps(rng, size, exact=False)),))
    else:
        stage = parse_filter(spec) if ":" in spec else build_filter(spec)
    frame = rng.integers(0, np.iinfo(dtype).max + 1, (53, 71, 3), dtype=dtype)
    for border in BORDER_MODES:
        out = np.full_like(frame, 0xA5)
        CpuBackend([stage], border=border).apply_into(out, frame)
        np.testing.assert_array_equal(out, definition_filter(frame, stage, border))


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_channel_counts_and_grayscale(rng, channels):
    stage = parse_filter("gaussian:sigma=1")
    shape = (21, 19) if channels == 1 else (21, 19, channels)
    frame = rng.integers(0, 256, shape, dtype=np.uint8)
    out = CpuBackend([stage]).apply(frame)
    assert out.shape == shape
    assert np.abs(out.astype(int) - reference_filter(frame, stage, "reflect101")).max() <= 1


def test_chain_matches_reference_chain(rng):
    # Exact taps (multiples of 1/256), so every stage must match exactly: with inexact taps a
    # legitimate 1-LSB rounding difference in one stage is amplified by the stages after it.
    binomial = "custom:taps=1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;4,16,24,16,4;1,4,6,4,1,normalize=1"
    stages = [parse_filter(binomial), parse_filter("sharpen:amount=0.5"), build_filter("edge")]
    frame = rng.integers(0, 256, (30, 44, 3), dtype=np.uint8)
    out = CpuBackend(stages, border="replicate").apply(frame)
    np.testing.assert_array_equal(out, reference_chain(frame, stages, "replicate"))


def test_identity_is_bit_exact_and_into_matches_alloc(rng):
    frame = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    np.testing.assert_array_equal(CpuBackend([build_filter("identity")]).apply(frame), frame)
    backend = CpuBackend([parse_filter("box:size=5")])
    out = _poisoned_output(frame)
    backend.apply_into(out, frame)
    np.testing.assert_array_equal(out, backend.apply(frame))


def test_non_contiguous_views(rng):
    big = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    view = big[::2, 5:45]
    out = CpuBackend([parse_filter("box:size=3")]).apply(np.ascontiguousarray(view))
    np.testing.assert_array_equal(CpuBackend([parse_filter("box:size=3")]).apply(view), out)


def test_blur_keeps_flat_frame_edges_under_reflect101():
    frame = np.full((20, 30, 3), 200, np.uint8)
    out = CpuBackend([parse_filter("gaussian:sigma=2")]).apply(frame)
    np.testing.assert_array_equal(out, frame)
    darker = CpuBackend([parse_filter("gaussian:sigma=2")], border="zero").apply(frame)
    assert darker[0, 0, 0] < 200


def test_pad_frame_modes():
    row = np.arange(1, 5, dtype=np.uint8).reshape(1, 4, 1)  # a b c d = 1 2 3 4
    assert pad_frame(row, 2, "reflect101")[2, :, 0].tolist() == [3, 2, 1, 2, 3, 4, 3, 2]
    assert pad_frame(row, 2, "replicate")[2, :, 0].tolist() == [1, 1, 1, 2, 3, 4, 4, 4]
    assert pad_frame(row, 2, "zero")[2, :, 0].tolist() == [0, 0, 1, 2, 3, 4, 0, 0]
    assert pad_frame(row, 7, "reflect101")[7, :, 0].tolist() == [2, 1, 2, 3, 4, 3, 2, 1, 2, 3, 4, 3,
                                                                 2, 1, 2, 3, 4, 3]


def test_bad_frames_raise_typed_errors():
    backend = CpuBackend([build_filter("identity")])
    with pytest.raises(FrameTypeError, match="float32 != uint8 or uint16"):
        backend.apply(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(FrameFormatError, match=r"\(4, 4, 2\)"):
        backend.apply(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(FrameFormatError, match="unexpected output shape"):
        backend.apply_into(np.zeros((4, 5, 3), np.uint8), np.zeros((4, 4, 3), np.uint8))
