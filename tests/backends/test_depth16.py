"""16-bit frames: the CPU backend against the float64 oracle, the API, and 10-bit video end to
end."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.frames.borders import BORDER_MODES
from streamconv.errors import FrameTypeError
from streamconv.chain.filters import (REGISTRY, FilterStage, build_filter, parse_filter,
                                      validate_taps)
from streamconv.chain.temporal import TEMPORAL_NAMES

from helpers.oracle import exact_for, random_taps, reference_chain, reference_filter

# scale and crop (the geometry stages) have tests of their own: test_resample.py
NAMED = [name for name in REGISTRY
         if name not in ("custom", "bank", "scale", "crop", *TEMPORAL_NAMES)]
NAMED += ["custom:taps=0,-1,0;-1,5,-1;0,-1,0"]
SIZES = [(1, 1), (1, 17), (17, 1), (23, 37)]


def _stage(spec: str) -> FilterStage:
    return parse_filter(spec) if ":" in spec else build_filter(spec)


def _frame16(rng, shape) -> np.ndarray:
    return rng.integers(0, 65536, shape, dtype=np.uint16)


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("height, width", SIZES)
@pytest.mark.parametrize("spec", NAMED)
def test_named_filter_on_uint16_matches_reference(rng, spec, border, height, width):
    stage = _stage(spec)
    frame = _frame16(rng, (height, width, 3))
    out = np.full_like(frame, 0xA5A5)
    CpuBackend([stage], border=border).apply_into(out, frame)
    expected = reference_filter(frame, stage, border)
    assert out.dtype == np.uint16
    assert np.abs(out.astype(np.int64) - expected).max() <= 1
    if all(exact_for(t, 65535) for t in stage.taps) and stage.combine != "magnitude":
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("size", [1, 3, 5, 7, 9, 15, 31])
@pytest.mark.parametrize("border", BORDER_MODES)
def test_exact_taps_on_uint16_are_exact(rng, size, border):
    # Non-negative multiples of 1/256 summing to at most 1: every float32 sum is exact.
    weights = rng.integers(0, 9, (size, size)).astype(np.float64)
    weights[size // 2, size // 2] += 1
    taps = np.floor(weights / weights.sum() * 256) / 256
    assert exact_for(taps, 65535)
    stage = FilterStage("custom", {}, (validate_taps(taps),))
    frame = _frame16(rng, (19, 29, 3))
    out = np.full_like(frame, 0x5A5A)
    CpuBackend([stage], border=border).apply_into(out, frame)
    np.testing.assert_array_equal(out, reference_filter(frame, stage, border))


@pytest.mark.parametrize("size", [3, 9, 31])
def test_float_taps_on_uint16_within_one_lsb_and_saturate(rng, size):
    taps = random_taps(rng, size, exact=False)
    taps[size // 2, size // 2] += 2 - taps.sum()  # a gain of 2, so that samples clip
    frame = _frame16(rng, (48, 48, 3))
    # bright enough to clip at a gain of 2
    frame[:40, :40] = rng.integers(50000, 65536, (40, 40, 3))
    for gain in (1.0, -1.0):  # past 65535, and below 0
        stage = FilterStage("custom", {}, (validate_taps(taps * gain),))
        for border in BORDER_MODES:
            out = CpuBackend([stage], border=border).apply(frame)
            expected = reference_filter(frame, stage, border)
            assert np.abs(out.astype(np.int64) - expected).max() <= 1
            assert (out.max() == 65535) if gain > 0 else (out.min() == 0)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_uint16_channel_counts_and_chain(rng, channels):
    # Exact taps whose sums stay below 2^16, so the chain must match sample for sample (with
    # inexact taps a 1-LSB difference in one stage is magnified by the gain of the next).
    binomial = "custom:taps=1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;4,16,24,16,4;1,4,6,4,1,normalize=1"
    stages = [parse_filter(binomial), parse_filter("custom:taps=0,0.25,0;0.25,0,0.25;0,0.25,0")]
    shape = (21, 26) if channels == 1 else (21, 26, channels)
    frame = _frame16(rng, shape)
    out = CpuBackend(stages).apply(frame)
    assert out.shape == shape and out.dtype == np.uint16
    np.testing.assert_array_equal(out, reference_chain(frame, stages, "reflect101"))


def test_16_bit_keeps_what_8_bit_loses(rng):
    # A gentle ramp over 64 of 65536 levels: 8-bit frames flatten it, 16-bit frames keep it.
    ramp = np.linspace(30000, 30063, 64).round().astype(np.uint16)
    frame = np.repeat(ramp[None, :, None], 8, axis=0).repeat(3, axis=2)
    out = CpuBackend([parse_filter("gaussian:sigma=1")]).apply(frame)
    assert len(np.unique(out[4, 8:-8, 0])) == 48


def test_uint16_output_must_match_input_dtype():
    backend = CpuBackend([build_filter("identity")])
    with pytest.raises(FrameTypeError, match="uint8 != uint16"):
        backend.apply_into(np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 3), np.uint16))
    with pytest.raises(FrameTypeError, match="float32 != uint8 or uint16"):
        backend.apply(np.zeros((4, 4, 3), np.float32))


# 10-bit video end to end (CPU backend; tests/backends/test_cuda_depth16.py runs the GPU's).

import subprocess  # noqa: E402
import sys  # noqa: E402

import av  # noqa: E402

import streamconv  # noqa: E402
from streamconv.io.sinks.display import to_bgr  # noqa: E402
from streamconv.io.sources.file import FileSource  # noqa: E402

LOSSLESS = {"codec": "libx264", "options": {"qp": "0"}}  # x264 is lossless at 10 bits with qp 0


def _ten_bit_clip(path, patches, *, space: int, colour_range: int, frames: int = 2, size=(128, 64),
                  pix_fmt: str = "yuv420p10le"):
    """A lossless clip of vertical patches, each (Y, U, V) in code values: yuv420p10le (x264,
    qp 0), or yuv420p12le (ffv1)."""
    width, height = size
    with av.open(str(path), "w") as container:
        if pix_fmt == "yuv420p10le":
            stream = container.add_stream("libx264", rate=25, options={"qp": "0"})
        else:
            stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.codec_context.colorspace, stream.codec_context.color_range = space, colour_range
        for index in range(frames):
            frame = av.VideoFrame(width, height, pix_fmt)
            for number, (plane, values) in enumerate(zip(frame.planes, zip(*patches))):
                rows, columns = (height, width) if number == 0 else (height // 2, width // 2)
                samples = np.frombuffer(plane, np.uint16).reshape(rows, -1)
                for k, value in enumerate(values):
                    samples[:, k * columns // len(values):(k + 1) * columns // len(values)] = value
            frame.colorspace, frame.color_range, frame.pts = space, colour_range, index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def _planes10(path, pix_fmt: str = "yuv420p10le") -> list[list[np.ndarray]]:
    """Every frame's Y, U and V planes as uint16 code values (the file's format checked first)."""
    with av.open(str(path)) as container:
        assert container.streams.video[0].codec_context.pix_fmt == pix_fmt
        return [[np.frombuffer(p, np.uint16).reshape(p.height, -1)[:, :p.width]
                 for p in frame.planes]
                for frame in container.decode(video=0)]


@pytest.mark.parametrize("colour", ["host", "backend"])
@pytest.mark.parametrize("space, colour_range, host_tolerance", [
    (1, 1, 1), (5, 1, 1),  # BT.709 and BT.601, limited range: within 1 LSB of 10 bits
    # full range: FFmpeg's scaler loses up to 3 LSB near white (greys checked)
    (1, 2, 3), (5, 2, 3),
], ids=["bt709-limited", "bt601-limited", "bt709-full", "bt601-full"])
def test_10_bit_flat_patches_come_back_through_identity(tmp_path, space, colour_range,
                                                        host_tolerance, colour):
    """The host path (FFmpeg's scaler) within a few levels; the planes path (streamconv's own
    fixed-point conversion, 16-bit RGB between) exactly."""
    low, high = (64, 940) if colour_range == 1 else (0, 1023)
    patches = [(500, 400, 600), (low + 10, 512, 512), (high - 10, 512, 512), (301, 601, 451)]
    clip = _ten_bit_clip(tmp_path / "flat.mkv", patches, space=space, colour_range=colour_range)
    output = tmp_path / "out.mkv"
    pipeline = streamconv.Pipeline(clip, ["identity"], output, backend="cpu", colour=colour,
                                   sink_options=LOSSLESS)
    assert (pipeline.planes is not None) == (colour == "backend")
    assert pipeline.run().frames == 2
    tolerance = host_tolerance if colour == "host" else 0
    with av.open(str(output)) as container:
        context = container.streams.video[0].codec_context
        # tagged alike
        assert (int(context.colorspace), int(context.color_range)) == (space, colour_range)
    for planes in _planes10(output):
        for plane, values in zip(planes, zip(*patches)):
            width = plane.shape[1] // len(values)
            for k, value in enumerate(values):
                # away from chroma edges
                inner = plane[2:-2, k * width + 2:(k + 1) * width - 2].astype(int)
                assert np.abs(inner - value).max() <= tolerance, (k, value, inner.min(),
                                                                  inner.max())


@pytest.mark.parametrize("colour_range", [1, 2], ids=["limited", "full"])
def test_12_bit_flat_patches_come_back_exactly_through_the_planes_path(tmp_path, colour_range):
    """yuv420p12le in, ffv1 out: the planes travel unconverted, streamconv's fixed point (64-bit
    sums towards YUV at 12 bits) gives every code value back, and the file stays 12-bit."""
    low, high = (256, 3760) if colour_range == 1 else (0, 4095)
    patches = [(2000, 1600, 2400), (low + 40, 2048, 2048), (high - 40, 2048, 2048),
               (1205, 2405, 1805)]
    clip = _ten_bit_clip(tmp_path / "flat12.mkv", patches, space=1, colour_range=colour_range,
                         pix_fmt="yuv420p12le")
    output = tmp_path / "out.mkv"
    pipeline = streamconv.Pipeline(clip, ["identity"], output, backend="cpu", colour="backend",
                                   sink_options={"codec": "ffv1"})
    assert pipeline.planes is not None and pipeline.planes.bits == 12
    assert pipeline.run().frames == 2
    for planes in _planes10(output, "yuv420p12le"):
        for plane, values in zip(planes, zip(*patches)):
            width = plane.shape[1] // len(values)
            for k, value in enumerate(values):
                # away from chroma edges
                inner = plane[2:-2, k * width + 2:(k + 1) * width - 2].astype(int)
                assert np.abs(inner - value).max() == 0, (k, value, inner.min(), inner.max())


def test_a_10_bit_ramp_keeps_its_levels(tmp_path):
    """A gentle luma ramp of 200 ten-bit levels still has them after a blur: no 8-bit banding."""
    ramp = [(v, 512, 512) for v in range(300, 500)]
    clip = _ten_bit_clip(tmp_path / "ramp.mkv", ramp, space=1, colour_range=1, size=(800, 16),
                         frames=1)
    output = tmp_path / "out.mkv"
    streamconv.Pipeline(clip, ["gaussian:sigma=1"], output, backend="cpu",
                        sink_options=LOSSLESS).run()
    luma = _planes10(output)[0][0][8, 16:-16]
    assert len(np.unique(luma)) >= 180  # an 8-bit path would keep about a quarter of them


def test_10_bit_cli_run_writes_10_bit_and_depth_8_writes_8(tmp_path):
    clip = _ten_bit_clip(tmp_path / "in.mkv", [(500, 400, 600)], space=1, colour_range=1)
    run = [sys.executable, "-m", "streamconv", "run", str(clip), "--filter", "box:size=3",
           "--backend", "cpu", "--no-progress"]
    deep = subprocess.run([*run, "-o", str(tmp_path / "deep.mp4")], capture_output=True, text=True,
                          timeout=120)
    assert deep.returncode == 0, deep.stderr
    shallow = subprocess.run([*run, "-o", str(tmp_path / "shallow.mp4"), "--depth", "8"],
                             capture_output=True, text=True, timeout=120)
    assert shallow.returncode == 0, shallow.stderr
    assert "filtered and written with 8 bits per channel" in shallow.stderr
    for name, pix_fmt in (("deep.mp4", "yuv420p10le"), ("shallow.mp4", "yuv420p")):
        with av.open(str(tmp_path / name)) as container:
            assert container.streams.video[0].codec_context.pix_fmt == pix_fmt


def test_16_bit_frames_into_an_8_bit_output_warn(tmp_path, caplog):
    clip = _ten_bit_clip(tmp_path / "in.mkv", [(500, 400, 600)], space=1, colour_range=1)
    for sink_options, said in (({"codec": "mpeg4"}, "has no 4:2:0 format deeper than 8 bits"),
                               ({"pix_fmt": "yuv420p"},
                                "16-bit frames of 10-bit input are written with 8 bits")):
        caplog.clear()
        output = tmp_path / f"{sink_options.get('codec', 'x264')}.mkv"
        streamconv.Pipeline(clip, ["identity"], output, backend="cpu",
                            sink_options=sink_options).run()
        assert said in caplog.text
        with av.open(str(output)) as container:
            assert container.streams.video[0].codec_context.pix_fmt == "yuv420p"


def test_file_source_depth_option(tmp_path):
    clip = _ten_bit_clip(tmp_path / "in.mkv", [(500, 400, 600)], space=1, colour_range=1)
    with FileSource(clip) as deep, FileSource(clip, depth=8) as shallow:
        assert (deep.dtype, deep.bits, deep.planes.pix_fmt) == (np.uint16, 10, "yuv420p10le")
        assert shallow.dtype == np.uint8 and shallow.planes is None  # 8-bit RGB from 10-bit planes
        wide, narrow = next(iter(deep)), next(iter(shallow))
    # The same picture; FFmpeg's scaler rounds the 10-bit -> 8-bit conversion within a few levels.
    assert np.abs(wide / 257 - narrow).max() <= 3
    with pytest.raises(streamconv.InputError, match="depth must be 8 or 16"):
        FileSource(clip, depth=10)


def test_display_shows_16_bit_frames_by_their_high_byte():
    frame = np.array([[[0x1234, 0xABCD, 0xFFFF]]], np.uint16)
    out = np.zeros((1, 1, 3), np.uint8)
    to_bgr(frame, out)
    assert out[0, 0].tolist() == [0xFF, 0xAB, 0x12]  # BGR


def test_8_bit_input_filtered_in_16_bits_is_written_as_8_without_a_warning(tmp_path, sample_clip,
                                                                           caplog):
    output = tmp_path / "out.mp4"
    source = FileSource(sample_clip, depth=16)
    assert source.dtype == np.uint16 and source.planes is None
    stats = streamconv.Pipeline(source, ["gaussian:sigma=1"], output, backend="cpu",
                                max_frames=3).run()
    assert stats.frames == 3 and "written with" not in caplog.text
    with av.open(str(output)) as container:
        assert container.streams.video[0].codec_context.pix_fmt == "yuv420p"
