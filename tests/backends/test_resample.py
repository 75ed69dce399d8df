"""scale and crop on the CPU: the parameters, the sizes, the float64 oracle (every kernel, up and
down, odd sizes, 8 and 16 bits, random and real frames, outputs poisoned), the measured distance
to cv2.resize and FFmpeg's scaler, chains with the 2-D filters, the API and the engine."""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.errors import FilterSpecError, FrameFormatError
from streamconv.chain.filters import parse_chain, parse_filter
from streamconv.frames.yuv import YuvLayout
from streamconv.chain.resample import KERNELS, MAX_REDUCTION, axis_taps

from helpers.oracle import reference_chain, reference_resize
from helpers.resample import RESIZES, real_frame
from helpers.streamcopy import audio_packets, make_clip

POISON = 0xA5
def scaled(frame: np.ndarray, spec: str) -> np.ndarray:
    """``frame`` through ``spec`` on the CPU backend, into an output poisoned first."""
    backend = CpuBackend(parse_chain([spec]))
    out = np.full(backend.output_shape(frame.shape), POISON, frame.dtype)
    backend.apply_into(out, frame)
    return out


def differences(got: np.ndarray, want: np.ndarray) -> tuple[int, float]:
    """(largest |got - want|, share of samples that differ at all)."""
    gap = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return int(gap.max()), float((gap > 0).mean())


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape, size", RESIZES)
def test_scale_matches_the_float64_oracle(rng, shape, size, kernel, dtype):
    frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    got = scaled(frame, f"scale:w={size[0]},h={size[1]},kernel={kernel}")
    assert got.shape == (size[1], size[0], shape[2])
    # float32 taps and sums against float64: a sample whose exact value lies within float32's
    # error of a half (a tie, with weights such as 1/2) may round the other way.
    assert differences(got, reference_resize(frame, *size, kernel))[0] <= 1


@pytest.mark.parametrize("kernel", KERNELS)
def test_scale_of_a_real_frame_matches_the_oracle(sample_clip, kernel):
    frame = real_frame(sample_clip)[100:220, 200:360]  # 160 x 120 of the picture
    for size in ((57, 43), (333, 250)):
        worst, share = differences(scaled(frame, f"scale:w={size[0]},h={size[1]},kernel={kernel}"),
                                   reference_resize(frame, *size, kernel))
        assert worst <= 1 and share <= 0.01


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("kernel, size", [("bilinear", (128, 96)), ("area", (32, 24))])
def test_scale_is_exact_where_every_weight_and_sum_is(rng, kernel, size, dtype):
    """Weights of 1/4 and 3/4 (doubling) or 1/2 (halving): float32 holds every product and sum."""
    frame = rng.integers(0, np.iinfo(dtype).max + 1, (48, 64, 3), dtype=dtype)
    np.testing.assert_array_equal(scaled(frame, f"scale:w={size[0]},h={size[1]},kernel={kernel}"),
                                  reference_resize(frame, *size, kernel))


@pytest.mark.parametrize("kernel", KERNELS)
def test_scale_to_the_same_size_copies_and_keeps_a_flat_frame_flat(rng, kernel):
    frame = rng.integers(0, 65536, (17, 23, 3), dtype=np.uint16)
    np.testing.assert_array_equal(scaled(frame, f"scale:kernel={kernel}"), frame)
    flat = np.full((30, 41, 3), 201, np.uint8)
    assert np.all(scaled(flat, f"scale:w=77,h=13,kernel={kernel}") == 201)


def test_taps_start_in_order_and_sum_to_one():
    for kernel in KERNELS:
        for n_in, n_out in ((1, 3), (3840, 1920), (1920, 1279), (7, 7), (100, 7)):
            taps = axis_taps(kernel, n_in, n_out)
            assert np.all(np.diff(taps.start) >= 0), (kernel, n_in, n_out)
            np.testing.assert_allclose(taps.weights.astype(np.float64).sum(axis=1), 1.0, atol=1e-6)


def test_crop_cuts_the_window_and_centres_by_default(rng):
    frame = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    np.testing.assert_array_equal(scaled(frame, "crop:x=3,y=5,w=20,h=10"), frame[5:15, 3:23])
    np.testing.assert_array_equal(scaled(frame, "crop:w=20,h=10"), frame[10:20, 10:30])
    np.testing.assert_array_equal(scaled(frame, "crop:x=7,y=0"), frame[:, 7:])


def test_sizes_follow_the_aspect_ratio_and_refusals_name_the_stage():
    shapes = {spec: parse_filter(spec).geometry.output_shape((1080, 1920, 3))
              for spec in ("scale:w=1280,h=-1", "scale:w=-2,h=101", "scale:h=540", "crop:w=100")}
    assert shapes == {"scale:w=1280,h=-1": (720, 1280, 3), "scale:w=-2,h=101": (101, 180, 3),
                      "scale:h=540": (540, 1920, 3), "crop:w=100": (1080, 100, 3)}
    for spec, match in (("scale:kernel=nearest", "unknown kernel"), ("scale:w=-1,h=-1", "both"),
                        ("scale:w=-3", "w must be"), ("crop:w=-5", "crop: w and h"),
                        ("crop:x=-2", "crop: x")):
        with pytest.raises(FilterSpecError, match=match):
            parse_filter(spec)
    with pytest.raises(FrameFormatError, match=f"at most {MAX_REDUCTION}x"):
        parse_filter("scale:w=100,h=100").geometry.output_shape((1080, 1920, 3))
    with pytest.raises(FrameFormatError, match="does not lie within"):
        CpuBackend(parse_chain(["crop:x=50,w=100"])).apply(np.zeros((10, 120, 3), np.uint8))


def test_sizes_from_the_aspect_ratio_round_halves_up_as_ffmpeg():
    """FFmpeg's scale rounds w*H/W (and its half, for -2) to the nearest integer, halves away
    from zero: 720x480 at 103 rows is 154.5 columns, 155; 12 columns of 4:3 are 9 rows, 10
    even (4.5 pairs, 5)."""
    def size(spec, shape):
        return parse_filter(spec).geometry.output_shape(shape)[:2]
    assert size("scale:w=-1,h=103", (480, 720, 3)) == (103, 155)
    assert size("scale:w=-1,h=105", (480, 720, 3)) == (105, 158)  # 157.5
    assert size("scale:w=-2,h=103", (480, 720, 3)) == (103, 154)  # 77.25 pairs
    assert size("scale:w=12,h=-2", (24, 32, 3)) == (10, 12)
    assert size("scale:w=4,h=-2", (24, 32, 3)) == (4, 4)  # 1.5 pairs
    assert size("scale:w=2,h=-1", (3, 4, 3)) == (2, 2)  # 1.5 rows


def test_planes_slots_take_the_output_size_and_refuse_an_odd_one(rng):
    layout = YuvLayout(64, 48)
    backend = CpuBackend(parse_chain(["scale:w=32,h=-1,kernel=area"]))
    slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
    assert slot.out_shape == (24, 32, 3) and slot.host_out.shape == YuvLayout(32, 24).shape
    with pytest.raises(FrameFormatError, match="cannot hold the chain's 31x24 output"):
        CpuBackend(parse_chain(["crop:w=31,h=24"])).allocate_slots(layout.frame_shape, 1,
                                                                   planes=layout)


def test_scale_and_crop_chain_with_the_2d_filters(rng):
    frame = rng.integers(0, 256, (45, 61, 3), dtype=np.uint8)
    chain = parse_chain(["box:size=3", "scale:w=40,h=-1,kernel=bicubic", "sharpen",
                         "crop:w=31,h=20", "edge"])
    # Each stage rounds to the frame's samples, so the chain equals its stages run one by one.
    expected = frame
    for stage in chain:
        expected = CpuBackend([stage]).apply(expected)
    np.testing.assert_array_equal(CpuBackend(chain).apply(frame), expected)
    box_then_down = CpuBackend(chain[:2]).apply(frame)
    boxed = reference_chain(frame, chain[:1], "reflect101")
    worst, _ = differences(box_then_down, reference_resize(boxed, 40, 30, "bicubic"))
    assert box_then_down.shape == (30, 40, 3) and worst <= 1


# Measured on the sample clip's first frame (640 x 360): (largest difference, share of samples
# more than 1 apart) against cv2.resize and FFmpeg's scaler (PyAV's reformat), by kernel and size.
# OpenCV's area is ours within 1 either way, and so is its bilinear upscaling; its bilinear and
# cubic do not widen when shrinking, its cubic has a = -0.75 and its Lanczos 8 taps.
# swscale's Lanczos enlarging is ours within 1; its area enlarges as bilinear.
CV2 = {cv2.INTER_AREA: {"area": {(320, 180): (1, 0.0), (213, 120): (1, 0.0), (960, 540): (1, 0.0)}},
       cv2.INTER_LINEAR: {"bilinear": {(960, 540): (1, 0.0), (1280, 720): (1, 0.0)}},
       cv2.INTER_CUBIC: {"bicubic": {(960, 540): (13, 0.05)}},
       cv2.INTER_LANCZOS4: {"lanczos3": {(960, 540): (8, 0.02)}}}
SWSCALE = {"LANCZOS": {"lanczos3": {(960, 540): (1, 0.0), (213, 120): (5, 0.006)}},
           "BICUBIC": {"bicubic": {(960, 540): (6, 0.012), (213, 120): (7, 0.023)}},
           "BILINEAR": {"bilinear": {(960, 540): (1, 0.0), (213, 120): (5, 0.003)}},
           "AREA": {"area": {(320, 180): (1, 0.0), (213, 120): (6, 0.002)}}}


def _within(got: np.ndarray, want: np.ndarray, bound: tuple[int, float]) -> None:
    gap = np.abs(got.astype(np.int64) - want.astype(np.int64))
    beyond_one = float((gap > 1).mean())
    assert gap.max() <= bound[0] and beyond_one <= bound[1] + 0.001, (gap.max(), beyond_one)


def test_scale_against_cv2_resize_as_measured(sample_clip):
    frame = real_frame(sample_clip)
    for interpolation, kernels in CV2.items():
        for kernel, sizes in kernels.items():
            for size, bound in sizes.items():
                ours = scaled(frame, f"scale:w={size[0]},h={size[1]},kernel={kernel}")
                _within(ours, cv2.resize(frame, size, interpolation=interpolation), bound)


def test_scale_against_ffmpeg_swscale_as_measured(sample_clip):
    frame = real_frame(sample_clip)
    picture = av.VideoFrame.from_ndarray(frame, format="rgb24")
    for interpolation, kernels in SWSCALE.items():
        for kernel, sizes in kernels.items():
            for size, bound in sizes.items():
                theirs = picture.reformat(width=size[0], height=size[1], format="rgb24",
                                          interpolation=interpolation).to_ndarray()
                ours = scaled(frame, f"scale:w={size[0]},h={size[1]},kernel={kernel}")
                _within(ours, theirs, bound)


def test_filter_and_streamfilter_give_the_new_size(rng):
    frame = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    with streamconv.Filter(["scale:w=32,h=-1", "edge"], backend="cpu") as chain:
        assert chain.output_shape((48, 64)) == (24, 32) and chain(frame[:, :, 0]).shape == (24, 32)
        out = np.full((24, 32, 3), POISON, np.uint8)
        chain.apply_into(out, frame)
        np.testing.assert_array_equal(out, chain(frame))
        with pytest.raises(FrameFormatError, match="output shape"):
            chain.apply_into(np.empty_like(frame), frame)
    with streamconv.StreamFilter("crop:x=1,y=2,w=10,h=8", ring=2, backend="cpu") as stream:
        results = list(stream.map([frame, frame[:, :, 0].copy(), frame]))
        assert [r.shape for r in results] == [(8, 10, 3), (8, 10), (8, 10, 3)]
        np.testing.assert_array_equal(results[0], frame[2:10, 1:11])


def test_run_writes_a_file_of_the_new_size_with_every_frame_and_the_audio(cli, tmp_path):
    clip = tmp_path / "in.mp4"
    make_clip(clip, frames=12)
    out = tmp_path / "out.mp4"
    result = cli("run", str(clip), "--filter", "gaussian", "--filter",
                 "scale:w=40,h=-2,kernel=area",
                 "--backend", "cpu", "-o", str(out), "--no-progress", "-v")
    assert result.returncode == 0, result.stderr
    assert "planes, converted by the backend" in result.stderr  # 4:2:0 in, 4:2:0 out at 40 x 30
    with av.open(str(clip)) as before, av.open(str(out)) as after:
        video_out = after.streams.video[0]
        assert (video_out.width, video_out.height) == (40, 30)
        times = [[frame.time for frame in video.decode(video=0)] for video in (before, after)]
    assert times[0] == times[1] and len(times[1]) == 12
    assert audio_packets(out) == audio_packets(clip)


def test_a_chain_with_an_odd_output_takes_rgb_and_is_padded(cli, sample_clip, tmp_path):
    out = tmp_path / "odd.mp4"
    result = cli("run", str(sample_clip), "--filter", "crop:w=101,h=61", "--backend", "cpu",
                 "--max-frames", "3", "-o", str(out), "--no-progress", "-v")
    assert result.returncode == 0, result.stderr
    assert "RGB, converted on the host" in result.stderr and "padding 101x61" in result.stderr
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height, stream.frames) == (102, 62, 3)
