"""Whatever a user types ends in streamconv's own message and its exit code, never in
"internal error" (exit 1) or a traceback: odd option values, malformed test-pattern specs,
sizes and rings the machine's memory cannot hold, encoder settings the encoder refuses.

Cases that need more memory than any machine has are refused by the check, before anything
is allocated, so they cost nothing to run. docs/reliability.md has the table.
"""

from __future__ import annotations

import argparse
import logging
from fractions import Fraction

import av
import numpy as np
import pytest

import streamconv
from streamconv.frames import checks as frames_module
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.cli.options import pixel_limit as _pixel_limit
from streamconv.io.ffmpeg.encoder_check import check_encoder_options
from streamconv.errors import FrameFormatError, InputError, OutputError
from streamconv.frames.checks import (MAX_RING, available_memory, check_host_memory,
                                      check_slot_memory)
from streamconv.io.sources.pattern import MAX_TEST_FPS, TestPattern, parse_test_spec
from streamconv.frames.yuv import YuvLayout

from helpers.cli import TINY, assert_error, assert_ok, assert_usage

HAS_X264 = "libx264" in av.codecs_available
needs_x264 = pytest.mark.skipif(not HAS_X264, reason="this FFmpeg has no libx264")


# ---------------------------------------------------------------- option values (exit 2)


@pytest.mark.parametrize("args, fragment", [
    (["--ring", "65"], "--ring: must be 1 to 64"),
    (["--ring", "100000"], "--ring: must be 1 to 64"),
    (["--ring", "99999999999999999999"], "--ring: must be 1 to 64"),
    (["--crf", "nan"], "--crf: must be a finite number"),
    (["--crf", "inf"], "--crf: must be a finite number"),
    (["--crf", "1e400"], "--crf: must be a finite number"),
    (["--crf", "-1"], "--crf: must be a number >= 0"),
    (["--timeout", "1e309"], "--timeout: must be a finite number"),
    (["--timeout", "1e308"], "--timeout: must be 0 to 1e+06 seconds"),
    (["--timeout", "-1"], "--timeout: must be 0 to"),
    (["--fps", "1e400"], "--fps: must be a finite number"),
    (["--fps", "nan"], "--fps: must be a finite number"),
    (["--max-pixels", "0x5"], "a plain 0 means no limit"),
    (["--max-pixels", "5x0"], "a plain 0 means no limit"),
    (["--max-pixels", "0x0"], "a plain 0 means no limit"),
    (["--max-frames", "1e3"], "--max-frames"),
    (["--size", "0x0"], "--size: expected WIDTHxHEIGHT"),
    (["--device", "-1"], "--device"),
    (["-o", ""], "--output is empty"),
    (["--pipeline", ""], "--pipeline is empty"),
    (["--stats-json", ""], "--stats-json is empty"),
    (["--codec", ""], "--codec is empty"),
    (["--pix-fmt", " "], "--pix-fmt is empty"),
    (["--pix-fmt", "no-such-format", "-o", "out.mp4"],
     "--pix-fmt: unknown pixel format 'no-such-format'"),
    (["--format", "no-such-muxer", "-o", "out.mp4"],
     "--format/-f: FFmpeg has no muxer 'no-such-muxer'"),
    (["--format", "hls", "-o", "out.m3u8"],
     "--format/-f: hls writes no OUTPUT file"),  # was: segments left hidden
    (["--format", "segment", "-o", "out%d.ts"], "--format/-f: segment writes no OUTPUT file"),
    # was: an empty file left
    (["--format", "null", "-o", "out"], "leave out -o to discard the frames"),
    (["--input-format", "rawvideo"], "--input-format applies to files, pipes and URLs"),
    (["--format", "mpegts"], "--format names OUTPUT's container, and there is no -o OUTPUT"),
    (["--preset", ""], "--preset is empty"),
    (["--max-frames", "0", "-o", "out.mp4"], "--max-frames 0 writes no frame"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
def test_odd_option_values_are_usage_errors(cli, tmp_path, args, fragment):
    result = cli("run", TINY, "--backend", "cpu", *args, cwd=tmp_path)
    assert_usage(result, fragment)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_source_is_a_usage_error(cli, tmp_path):
    assert_usage(cli("run", "", "--backend", "cpu", cwd=tmp_path), "SOURCE is empty")


def test_hwaccel_empty_is_a_usage_error(cli, tmp_path, sample_clip):
    assert_usage(cli("run", str(sample_clip), "--hwaccel", "", cwd=tmp_path), "--hwaccel is empty")


@pytest.mark.parametrize("args", [
    ["--ring", str(MAX_RING)],
    ["--max-pixels", "0"],
    ["--crf", "0", "-o", "out.mkv", "--codec", "ffv1"],  # ffv1 has no crf: a warning, not an error
    ["--timeout", "1e6"],
    ["--max-frames", "0"],  # without an output: a run that reads nothing
])
def test_edge_values_in_range_are_accepted(cli, tmp_path, args):
    result = cli("run", TINY, "--backend", "cpu", "-q", *args, cwd=tmp_path)
    assert_ok(result)


def test_max_pixels_plain_zero_is_no_limit_and_a_zero_size_is_refused():
    assert _pixel_limit("0") is None and _pixel_limit(" 00 ") is None
    assert _pixel_limit("3840x2160") == 3840 * 2160 and _pixel_limit("1000") == 1000
    for text in ("0x5", "5x0", "0x0", "-1", "lots"):
        with pytest.raises(argparse.ArgumentTypeError):
            _pixel_limit(text)


# ---------------------------------------------------------------- test pattern specs (exit 4)


@pytest.mark.parametrize("spec, fragment", [
    ("test@1.2.3", "'1.2.3' is not a frame rate"),
    ("test@nan", "expected test[:WxH][@FPS]"),
    ("test@inf", "expected test[:WxH][@FPS]"),
    ("test@1e400", "expected test[:WxH][@FPS]"),
    ("test,frames=-1", "expected test[:WxH][@FPS]"),
    ("test:0x0", "size must be positive"),
    ("test:0x48", "size must be positive"),
    ("test@0", "fps must be 0.001 to 1000"),
    ("test@0.0001", "fps must be 0.001 to 1000"),
    ("test@1001", "fps must be 0.001 to 1000"),
    ("test:64x48@99999999999,frames=2", "fps must be 0.001 to 1000"),
    ("test:99999999x99999999", "over the limit"),
])
def test_malformed_test_specs_exit_4(cli, tmp_path, spec, fragment):
    result = cli("run", spec, "-o", str(tmp_path / "out.mp4"), "--backend", "cpu", cwd=tmp_path)
    assert_error(result, 4, fragment)
    assert list(tmp_path.iterdir()) == []


def test_a_one_pixel_test_pattern_runs_and_is_padded_for_yuv420p(cli, tmp_path):
    output = tmp_path / "out.mp4"
    assert_ok(cli("run", "test:1x1,frames=2", "-o", str(output), "--filter", "box", "--backend",
                  "cpu", "-q"))
    with av.open(str(output)) as container:
        decoded = list(container.decode(video=0))
    assert len(decoded) == 2 and (decoded[0].width, decoded[0].height) == (2, 2)


def test_a_test_pattern_larger_than_memory_is_refused_before_drawing_it(cli, tmp_path):
    # 10^12 pixels: 6 TB of pattern, more than any machine has; with no --max-pixels limit
    # only the memory check stands between it and a MemoryError (or the OOM killer).
    result = cli("run", "test:1000000x1000000,frames=1", "--max-pixels", "0", "-o",
                 str(tmp_path / "out.mp4"), "--backend", "cpu", cwd=tmp_path)
    assert_error(result, 4, "1000000x1000000 test pattern", "of host memory", "is available")
    assert list(tmp_path.iterdir()) == []


def test_parse_test_spec_reports_input_errors():
    for spec in ("test@1.2.3", "test@0", "test:0x0", "test,frames=x", "test@nan"):
        with pytest.raises(InputError):
            parse_test_spec(spec)
    pattern = parse_test_spec("test:32x16@1000,frames=1")
    assert pattern.shape == (16, 32, 3) and pattern.frame_rate == MAX_TEST_FPS


@pytest.mark.parametrize("fps", [0, -1, 1e-4, 1001, float("nan"), float("inf")])
def test_test_pattern_refuses_frame_rates_out_of_range(fps):
    with pytest.raises(FrameFormatError, match="fps"):
        TestPattern(8, 8, fps=fps)


def test_test_pattern_frame_rates_at_the_bounds_are_kept():
    assert TestPattern(8, 8, fps=0.001).frame_rate == Fraction(1, 1000)
    assert TestPattern(8, 8, fps=Fraction(30000, 1001)).frame_rate == Fraction(30000, 1001)


def test_test_pattern_draws_what_the_full_grid_formula_gives():
    # The pattern is built from broadcast rows and columns (no full-size temporaries): it must
    # still be, pixel for pixel, the full-grid float32 formula.
    for width, height in ((1, 1), (64, 48), (333, 77)):
        ys, xs = np.mgrid[0:height, 0:2 * width].astype(np.float32)
        expected = np.empty((height, 2 * width, 3), np.uint8)
        expected[..., 0] = 255 * (xs / max(2 * width - 1, 1))
        expected[..., 1] = 255 * (ys / max(height - 1, 1))
        expected[..., 2] = 64 + 128 * (((xs // 32) + (ys // 32)) % 2).astype(np.float32)
        np.testing.assert_array_equal(TestPattern(width, height)._base, expected)


def test_test_pattern_checks_memory_before_allocating(monkeypatch):
    monkeypatch.setattr(frames_module, "available_memory", lambda: 1 << 20)
    with pytest.raises(InputError,
                       match=r"a 1024x1024 test pattern would take 8 MiB of host memory, but only 1 MiB"):
        TestPattern(1024, 1024)
    TestPattern(256, 256)  # 0.5 MiB: fits


# ---------------------------------------------------------------- slots and memory


def test_available_memory_is_a_positive_byte_count():
    available = available_memory()
    assert available is None or (isinstance(available, int) and available > 0)


def test_slot_memory_is_refused_with_what_it_would_take(monkeypatch):
    monkeypatch.setattr(frames_module, "available_memory", lambda: 1 << 30)
    shape = (2160, 3840, 3)
    assert check_slot_memory(shape, np.uint8, 3) == 2 * 3 * 3840 * 2160 * 3
    with pytest.raises(InputError) as refused:
        check_slot_memory(shape, np.uint16, 64, what="test:3840x2160")
    message = str(refused.value)
    assert "64 slot(s) of 2 x 2160x3840x3 uint16 frames (test:3840x2160)" in message
    assert "would take 5.9 GiB" in message and "only 1.0 GiB is available" in message
    assert "--ring" in message


def test_slot_memory_counts_planes_at_their_size(monkeypatch):
    monkeypatch.setattr(frames_module, "available_memory", lambda: 1 << 30)
    layout = YuvLayout(3840, 2160)
    assert check_slot_memory((2160, 3840, 3), np.uint8, 4, planes=layout) == 2 * 4 * layout.nbytes
    with pytest.raises(InputError, match="yuv420p planes"):
        check_slot_memory((2160, 3840, 3), np.uint8, 64, planes=layout)


@pytest.mark.parametrize("ring", [0, MAX_RING + 1, 100_000])
def test_slot_memory_refuses_a_ring_out_of_range(ring):
    with pytest.raises(FrameFormatError, match=f"ring must be 1 to {MAX_RING}"):
        check_slot_memory((48, 64, 3), np.uint8, ring)


def test_memory_check_is_skipped_when_memory_is_unknown(monkeypatch):
    monkeypatch.setattr(frames_module, "available_memory", lambda: None)
    check_host_memory(1 << 60, "an exabyte")  # nothing to compare with: no refusal


# ---------------------------------------------------------------- encoder settings (exit 6)


@needs_x264
@pytest.mark.parametrize("options, fragment", [
    ({"preset": "bogus"}, "refuses option preset='bogus'"),
    ({"crf": "nan"}, "refuses option crf='nan'"),
    ({"crf": "-5"}, "refuses option crf='-5'"),
    ({"crf": "20", "preset": "bogus"}, "refuses option preset='bogus':"),  # only the bad one named
])
def test_encoder_options_refused_up_front_name_the_option(options, fragment):
    with pytest.raises(OutputError, match=fragment.replace("(", r"\(")) as refused:
        check_encoder_options("libx264", "yuv420p", 3840, 2160, Fraction(30), options)
    assert "libx264 (yuv420p, 3840x2160 at 30 fps)" in str(refused.value)
    if "crf" in options and options["crf"] == "20":
        assert "crf" not in str(refused.value)


@needs_x264
def test_encoder_options_that_open_pass_and_unknown_ones_are_reported(caplog):
    assert check_encoder_options("libx264", "yuv420p", 64, 48, 30,
                                 {"crf": "23", "preset": "ultrafast"}) == []
    with caplog.at_level(logging.WARNING, logger="streamconv"):
        assert check_encoder_options("libx264", "yuv420p", 64, 48, 29.97,
                                     {"no_such_option": "1"}) == \
            ["no_such_option"]
    assert "ignores option no_such_option=1" in caplog.text


@pytest.mark.parametrize("codec, fragment", [
    ("no-such-encoder", "unknown encoder 'no-such-encoder'"),
    ("aac", "'aac' is an audio encoder, not a video encoder"),
])
def test_encoders_that_cannot_encode_video_are_refused(codec, fragment):
    if codec not in av.codecs_available and codec != "no-such-encoder":
        pytest.skip(f"this FFmpeg has no {codec}")
    with pytest.raises(OutputError, match=fragment):
        check_encoder_options(codec, "yuv420p", 64, 48, 30, {})


@needs_x264
@pytest.mark.parametrize("args, fragment", [
    (["--preset", "bogus"], "refuses option preset='bogus'"),
    (["--crf", "20", "--preset", "bogus"], "refuses option preset='bogus'"),
    (["--codec", "aac"], "audio encoder"),
])
def test_cli_refuses_encoder_settings_before_the_run(cli, tmp_path, args, fragment):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--backend", "cpu", *args,
                 cwd=tmp_path)
    message = assert_error(result, 6, fragment)
    assert "frame 0" not in message  # refused when the output was opened, not at the first frame
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix, own",
                         [("ogv", "video codec is "), ("y4m", "video codec is wrapped_avframe")])
def test_a_container_that_cannot_hold_the_codec_is_refused_at_the_first_frame(cli, tmp_path, suffix,
                                                                              own):
    """libx264 (the default) in Ogg or YUV4MPEG: the muxer refuses it only when writing its header,
    which came with the encoder's first packet, after the last frame: the whole run, then exit 8."""
    result = cli("run", "test:64x48,frames=30", "-o", str(tmp_path / f"out.{suffix}"), "--backend",
                 "cpu", cwd=tmp_path)
    message = assert_error(result, 6, f"cannot write {tmp_path / f'out.{suffix}'} with libx264",
                           own)
    assert "finishing" not in message
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- names and files


@pytest.mark.parametrize("option", ["-o", "--stats-json"])
def test_a_300_character_file_name_exits_6(cli, tmp_path, option):
    name = "a" * 300 + (".mp4" if option == "-o" else ".json")
    result = cli("run", TINY, option, str(tmp_path / name), "--backend", "cpu", cwd=tmp_path)
    assert_error(result, 6, "too long")
    assert list(tmp_path.iterdir()) == []


def test_video_stream_out_of_range_exits_4(cli, tmp_path, sample_clip):
    for index in ("99", "99999999999999999999"):
        result = cli("run", str(sample_clip), "--video-stream", index, "--backend", "cpu",
                     cwd=tmp_path)
        assert_error(result, 4, f"video stream {index} requested, input has 1")


@pytest.mark.parametrize("ring", [0, MAX_RING + 1])
def test_library_pipeline_refuses_a_ring_out_of_range(ring):
    with pytest.raises(streamconv.SettingsError,
                       match=f"ring must be an integer from 1 to {MAX_RING}"):
        streamconv.Pipeline(TINY, [], backend="cpu", ring=ring)


def test_pipeline_checks_slot_memory_before_allocating_any(monkeypatch):
    allocations = []
    real = CpuBackend.allocate_slots
    monkeypatch.setattr(CpuBackend, "allocate_slots",
                        lambda self, *a, **k: allocations.append(a) or real(self, *a, **k))
    monkeypatch.setattr(frames_module, "available_memory", lambda: 16 << 20)
    with pytest.raises(InputError,
                       match=r"64 slot\(s\) of 2 x 240x320x3 uint8 frames .* would take 28 MiB"):
        streamconv.Pipeline("test:320x240,frames=2", [], backend="cpu", ring=64)
    assert allocations == []
    stats = streamconv.Pipeline("test:320x240,frames=2", [], backend="cpu", ring=3).run()  # 1.3 MiB
    assert stats.frames == 2 and len(allocations) == 1


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 1e308, -1.0])
def test_the_library_refuses_a_timeout_ffmpeg_cannot_count(sample_clip, timeout):
    with pytest.raises(streamconv.SettingsError, match="timeout must be 0 to"):
        streamconv.FileSource(str(sample_clip), timeout=timeout)


@pytest.mark.parametrize("source", ["a" * 300, "a" * 300 + "/x.mp4", "file:" + "a" * 300])
def test_a_source_name_too_long_for_the_file_system_exits_4(cli, tmp_path, source):
    """(regression: "internal error: OSError: File name too long", exit 1)"""
    assert_error(cli("run", source, "--backend", "cpu", cwd=tmp_path), 4, "cannot open input",
                 "File name too long")
    assert list(tmp_path.iterdir()) == []


def test_a_demuxer_that_cannot_tell_the_codec_is_an_input_error(cli, tmp_path, sample_clip):
    """A video file read as images names no codec (regression: "internal error: AttributeError")."""
    result = cli("run", str(sample_clip), "--input-format", "image2", "-o",
                 str(tmp_path / "out.mp4"), "--backend", "cpu", cwd=tmp_path)
    assert_error(result, 4, "no decoder for video stream 0", "--input-format")
    assert list(tmp_path.iterdir()) == []


LONG = "a" * 100_000


@pytest.mark.parametrize("args, code", [
    (["run", TINY, "--crf", LONG], 2),  # argparse's own message
    (["run", TINY, "--preset", LONG, "-o", "out.mp4"], 2),  # x264 printed it whole, twice
    (["run", TINY, "--pipeline", LONG], 3),  # streamconv's own error line
    (["run", " ".join(LONG[:50_000])], 4),  # blanks in it: the line is cut instead
    (["batch", LONG, "-o", "out"], 4),
], ids=["crf", "preset", "pipeline", "spaced-source", "batch"])
def test_a_value_of_100000_characters_is_refused_and_quoted_by_a_short_prefix(cli, tmp_path, args,
                                                                              code):
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == code, result.stderr[:2000]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    error = next(line for line in result.stderr.splitlines() if ": error:" in line)
    assert "a" * 61 not in error and len(error) < 2_100 and len(result.stderr) < 4_000, error[:3000]
    assert "characters)" in error or "characters more)" in error, error
    assert list(tmp_path.iterdir()) == []
