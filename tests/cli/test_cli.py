"""The ``streamconv`` command end to end, through ``python -m streamconv`` in a subprocess.

Every error path must end with its own exit code and one ``streamconv: error:`` line (no
traceback); the file paths must round-trip frame count, size and timestamps; a lossless
encode must hold exactly what the CPU reference backend computes; Ctrl-C and SIGTERM must
leave a finished, playable file. Fixture files are made here, into tmp_path.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends import cuda_status
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import REGISTRY, parse_chain
from streamconv.chain.presets import list_presets, load_preset

from helpers.cli import REPO, TINY, assert_error, assert_ok

# ---------------------------------------------------------------- helpers


def video_info(path: Path) -> tuple[int, int, int, list[Fraction]]:
    """(frame count, width, height, per-frame timestamps in seconds) of a file's first video
    stream."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        assert frames, f"{path} decodes to no frames"
        times = [Fraction(f.pts) * Fraction(stream.time_base) for f in frames]
        return len(frames), frames[0].width, frames[0].height, times


def decode_rgb(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def first_frame(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def make_audio_only(path: Path) -> None:
    """One second of a 440 Hz tone, PCM in .wav or AAC in .m4a, and no video stream."""
    codec, sample_format = ("aac", "fltp") if path.suffix == ".m4a" else ("pcm_s16le", "s16")
    rate, chunk = 16000, 1024
    tone = np.sin(2 * np.pi * 440 * np.arange(15 * chunk) / rate)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.layout = "mono"
        for start in range(0, tone.size, chunk):
            piece = tone[start:start + chunk]
            data = (piece * 10000).astype(np.int16) if sample_format == "s16" else piece.astype(
                np.float32)
            frame = av.AudioFrame.from_ndarray(data[None, :], format=sample_format, layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with av.open(str(path)) as check:
        assert check.streams.audio and not check.streams.video


def lossless_rgb_encoder() -> tuple[list[str], str]:
    """CLI options of an RGB encoder that round-trips uint8 RGB exactly, and the file suffix."""
    candidates = [
        (["--codec", "ffv1", "--pix-fmt", "bgr0"], "ffv1", "bgr0", ".mkv"),
        (["--codec", "ffv1", "--pix-fmt", "gbrp"], "ffv1", "gbrp", ".mkv"),
        (["--codec", "libx264rgb", "--pix-fmt", "rgb24", "--crf", "0"], "libx264rgb", "rgb24",
         ".mkv"),
    ]
    for options, codec, pix_fmt, suffix in candidates:
        if codec not in av.codecs_available:
            continue
        formats = {f.name for f in (av.Codec(codec, "w").video_formats or ())}
        if pix_fmt in formats:
            return options, suffix
    pytest.skip("no lossless RGB encoder (ffv1 bgr0/gbrp, libx264rgb) in this FFmpeg build")


# ---------------------------------------------------------------- errors and exit codes


def test_missing_input_exits_4(cli, tmp_path):
    result = cli("run", str(tmp_path / "nope.mp4"), "-o", str(tmp_path / "out.mp4"))
    assert_error(result, 4, "input not found", "nope.mp4")
    assert not (tmp_path / "out.mp4").exists()


def test_directory_input_exits_4(cli, tmp_path):
    folder = tmp_path / "clips"
    folder.mkdir()
    result = cli("run", str(folder), "-o", str(tmp_path / "out.mp4"))
    assert_error(result, 4, "directory", "clips")
    assert list(tmp_path.iterdir()) == [folder]


def test_random_bytes_input_exits_4(cli, tmp_path, rng):
    garbage = tmp_path / "garbage.mp4"
    for _ in range(20):  # FFmpeg recognises a rare random buffer as some format: draw again
        garbage.write_bytes(rng.integers(0, 256, 8192, dtype=np.uint8).tobytes())
        try:
            av.open(str(garbage)).close()
        except av.FFmpegError:
            break
    else:
        pytest.fail("could not draw bytes FFmpeg refuses")
    result = cli("run", str(garbage), "-o", str(tmp_path / "out.mp4"))
    assert_error(result, 4, "cannot open input", "garbage.mp4")
    assert sorted(tmp_path.iterdir()) == [garbage]  # no output, no temporary file


@pytest.mark.parametrize("suffix", [".wav", ".m4a"])
def test_input_without_video_exits_5(cli, tmp_path, suffix):
    audio = tmp_path / f"tone{suffix}"
    make_audio_only(audio)
    result = cli("run", str(audio), "-o", str(tmp_path / "out.mp4"))
    assert_error(result, 5, "no video stream", audio.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [audio.name]


def _taps(size: int) -> str:
    return ";".join(",".join(["1"] * size) for _ in range(size))


@pytest.mark.parametrize("spec, fragment", [
    ("blurr", "unknown filter 'blurr'"),
    ("box:radius=2", "unknown parameter 'radius'"),
    ("box:size=abc", "expected an integer"),
    ("gaussian:sigma=wide", "expected a number"),
    ("gaussian:sigma=nan", "finite"),
    ("sharpen:amount=inf", "finite"),
    ("custom:taps=0,-1,0;-1,x,-1;0,-1,0", "'x' is not a number"),
    ("custom:taps=1,2,3;4,5;6,7,8", "different lengths"),
    ("custom:taps=0,0,0;0,nan,0;0,0,0", "NaN or infinity"),
    ("custom:taps=0,0,0;0,inf,0;0,0,0", "NaN or infinity"),
    ("custom:taps=-inf", "NaN or infinity"),
    ("custom:taps=1,1;1,1", "odd square"),
    ("box:size=4", "odd"),
    ("box:size=33", "1..31"),
    (f"custom:taps={_taps(33)}", "too large"),
    ("custom:taps=1,2,3", "odd square"),
    ("box:size=3,size=5", "given twice"),
    ("custom", "exactly one of"),
])
def test_bad_filter_spec_exits_3(cli, tmp_path, spec, fragment):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--filter", spec)
    assert_error(result, 3, fragment)
    assert list(tmp_path.iterdir()) == []


def test_bad_filter_after_good_one_exits_3(cli, tmp_path):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--filter", "box", "--filter",
                 "box:size=0")
    assert_error(result, 3, "size must be odd")
    assert list(tmp_path.iterdir()) == []


def test_unknown_preset_exits_3(cli, tmp_path):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--pipeline", "sharpest")
    line = assert_error(result, 3, "unknown preset 'sharpest'")
    for name in list_presets():  # the message lists the known ones
        assert name in line
    assert list(tmp_path.iterdir()) == []


def test_existing_output_without_overwrite_exits_6_and_keeps_it(cli, tmp_path):
    output = tmp_path / "out.mp4"
    old = b"precious bytes, not a video" * 10
    output.write_bytes(old)
    result = cli("run", TINY, "-o", str(output), "--filter", "box")
    assert_error(result, 6, "output exists", "--overwrite")
    assert output.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_existing_output_with_overwrite_is_replaced(cli, tmp_path):
    output = tmp_path / "out.mp4"
    output.write_bytes(b"old")
    result = cli("run", TINY, "-o", str(output), "--filter", "box", "--overwrite", "-q")
    assert_ok(result)
    count, width, height, _ = video_info(output)
    assert (count, width, height) == (3, 64, 48)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_output_same_as_input_exits_6_even_with_overwrite(cli, tmp_path):
    clip = tmp_path / "clip.mp4"
    assert_ok(cli("run", TINY, "-o", str(clip), "-q"))
    before = clip.read_bytes()
    for spelled in ("clip.mp4", "./clip.mp4", str(clip), "../" + tmp_path.name + "/clip.mp4"):
        result = cli("run", "clip.mp4", "-o", spelled, "--overwrite", "--filter", "box",
                     cwd=tmp_path)
        assert_error(result, 6, "same file as the input")
        assert clip.read_bytes() == before
    link = tmp_path / "link.mp4"
    link.hardlink_to(clip)
    result = cli("run", str(clip), "-o", str(link), "-y", cwd=tmp_path)
    assert_error(result, 6, "same file as the input")
    assert clip.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4", "link.mp4"]


def test_missing_output_folder_exits_6(cli, tmp_path):
    result = cli("run", TINY, "-o", str(tmp_path / "no" / "such" / "out.mp4"))
    assert_error(result, 6, "output folder does not exist")
    assert list(tmp_path.iterdir()) == []


def test_output_that_is_a_folder_exits_6(cli, tmp_path):
    (tmp_path / "out.mp4").mkdir()
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--overwrite")
    assert_error(result, 6, "folder")
    assert (tmp_path / "out.mp4").is_dir()


@pytest.mark.parametrize("options, fragment", [
    (["--codec", "no-such-encoder"], "unknown encoder 'no-such-encoder'"),
    (["--codec", "libx264", "--pix-fmt", "rgb24"], "does not support pixel format 'rgb24'"),
])
def test_encoder_refused_before_running_exits_6(cli, tmp_path, options, fragment):
    if "libx264" in options and "libx264" not in av.codecs_available:
        pytest.skip("this FFmpeg has no libx264")
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), *options)
    assert_error(result, 6, fragment)
    assert list(tmp_path.iterdir()) == []


def test_stats_json_in_missing_folder_exits_6_before_running(cli, tmp_path):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"),
                 "--stats-json", str(tmp_path / "nowhere" / "stats.json"))
    assert_error(result, 6, "--stats-json", "nowhere")
    assert list(tmp_path.iterdir()) == []


def test_cuda_backend_unavailable_exits_7(cli, tmp_path):
    usable, reason = cuda_status(0)
    if usable:
        pytest.skip(f"CUDA is usable here ({reason})")
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--backend", "cuda", "--filter",
                 "box")
    assert_error(result, 7, "cuda backend unavailable", reason)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    [],
    ["frobnicate"],
    ["run"],
    ["run", TINY, "--bogus"],
    ["run", TINY, "--max-frames", "-1"],
    ["run", TINY, "--max-frames", "ten"],
    ["run", TINY, "--ring", "0"],
    ["run", TINY, "--backend", "opencl"],
    ["run", TINY, "--border", "wrap"],
    ["run", TINY, "--device", "-2"],
    ["run", TINY, "--crf", "high"],
])
def test_usage_errors_exit_2(cli, tmp_path, args):
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "usage: streamconv" in result.stderr
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- file round trips


@pytest.mark.parametrize("stages", [
    ["--pipeline", "edge"],
    ["--filter", "gaussian:sigma=1.5", "--filter", "sharpen:amount=0.5", "--filter", "sobel-x"],
], ids=["pipeline-edge", "filter-chain"])
def test_round_trip_keeps_frames_size_and_timestamps(cli, tmp_path, sample_clip, stages):
    output = tmp_path / "OUT.mp4"
    result = cli("run", str(sample_clip), "-o", str(output), *stages, "-q")
    assert_ok(result)
    count, width, height, times = video_info(output)
    in_count, in_width, in_height, in_times = video_info(sample_clip)
    assert (count, width, height) == (in_count, in_width, in_height)
    assert times == in_times
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT.mp4"]
    # the frames were filtered, not copied
    first_in, first_out = first_frame(sample_clip), first_frame(output)
    assert np.abs(first_in.astype(int) - first_out.astype(int)).mean() > 10


@pytest.mark.parametrize("stages, preset, specs, border", [
    (["--filter", "gaussian:sigma=1.5", "--filter", "sharpen"], None,
     ["gaussian:sigma=1.5", "sharpen"], "reflect101"),
    (["--pipeline", "emboss", "--filter", "laplacian"], "emboss", ["laplacian"], "replicate"),
    (["--filter", "box:size=5", "--filter", "edge", "--border", "zero"], None,
     ["box:size=5", "edge"], "zero"),
    (["--filter", "custom:taps=0,0,1;0,0,0;-1,0,0"], None, ["custom:taps=0,0,1;0,0,0;-1,0,0"],
     "reflect101"),
], ids=["chain", "preset-then-filter", "zero-border-edge", "custom"])
def test_lossless_output_equals_cpu_backend(cli, tmp_path, sample_clip, stages, preset, specs,
                                            border):
    options, suffix = lossless_rgb_encoder()
    output = tmp_path / f"out{suffix}"
    result = cli("run", str(sample_clip), "-o", str(output), *options, "--max-frames", "10",
                 "--backend", "cpu", *stages, "-q")
    assert_ok(result)
    filters = list(load_preset(preset).filters) if preset else []
    backend = CpuBackend(filters + parse_chain(specs), border=border)
    with streamconv.FileSource(sample_clip) as source:
        expected = [backend.apply(frame) for _, frame in zip(range(10), source)]
    got = decode_rgb(output)
    assert len(got) == len(expected) == 10
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have.shape == want.shape
        if not np.array_equal(have, want):
            diff = np.abs(have.astype(int) - want.astype(int))
            pytest.fail(f"frame {index}: {np.count_nonzero(diff)} values differ, max {diff.max()}")


def test_max_frames_and_stats_json(cli, tmp_path, sample_clip):
    output, stats_path = tmp_path / "out.mp4", tmp_path / "stats.json"
    result = cli("run", str(sample_clip), "-o", str(output), "--max-frames", "7",
                 "--filter", "box", "--stats-json", str(stats_path))
    assert_ok(result)
    assert re.search(r"^7 frames in ", result.stderr, re.MULTILINE), result.stderr
    count, width, height, times = video_info(output)
    assert (count, width, height) == (7, 640, 360)
    assert times == video_info(sample_clip)[3][:7]
    stats = json.loads(stats_path.read_text())
    assert stats["frames"] == 7
    assert stats["interrupted"] is False
    assert isinstance(stats["fps"], (int, float)) and stats["fps"] > 0
    for stage in ("read", "kernel", "write", "latency"):
        row = stats["stages_ms"][stage]
        values = [row[key] for key in ("p50", "p95", "p99", "max")]
        assert all(isinstance(v, (int, float)) and v >= 0 for v in values), row
        assert values == sorted(values), row
    assert len(stats["samples_ms"]["latency"]) == 7


def test_no_output_discards_frames(cli, tmp_path):
    stats_path = tmp_path / "stats.json"
    result = cli("run", "test:96x64,frames=12", "--filter", "gaussian", "--stats-json",
                 str(stats_path), "-q", cwd=tmp_path)
    assert_ok(result)
    assert json.loads(stats_path.read_text())["frames"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stats.json"]


def test_odd_frame_size_is_padded_for_yuv420p(cli, tmp_path):
    output = tmp_path / "odd.mp4"
    result = cli("run", "test:65x49,frames=5", "-o", str(output), "--filter", "box")
    assert_ok(result)
    assert "padding" in result.stderr and "65x49" in result.stderr and "66x50" in result.stderr
    count, width, height, _ = video_info(output)
    assert (count, width, height) == (5, 66, 50)


def test_an_odd_height_is_kept_with_yuv422p_and_an_odd_width_padded(cli, tmp_path):
    """4:2:2 halves the chroma's width only: an odd height needs no padding row."""
    output = tmp_path / "odd.mkv"
    assert_ok(cli("run", "test:64x49,frames=5", "-o", str(output), "--filter", "box", "--pix-fmt",
                  "yuv422p"))
    assert video_info(output)[:3] == (5, 64, 49)
    result = cli("run", "test:65x49,frames=5", "-o", str(output), "--filter", "box", "--pix-fmt",
                 "yuv422p", "--overwrite")
    assert_ok(result)
    assert "padding 65x49 frames to 66x49" in result.stderr and \
        video_info(output)[:3] == (5, 66, 49)


def test_odd_frame_size_kept_with_yuv444p(cli, tmp_path):
    output = tmp_path / "odd.mp4"
    result = cli("run", "test:65x49,frames=5", "-o", str(output), "--filter", "box", "--pix-fmt",
                 "yuv444p")
    assert_ok(result)
    assert "padding" not in result.stderr
    count, width, height, _ = video_info(output)
    assert (count, width, height) == (5, 65, 49)


# ---------------------------------------------------------------- the other commands


def test_filters_lists_registry_and_presets(cli):
    result = cli("filters")
    assert_ok(result)
    names = {line.split()[0] for line in result.stdout.splitlines() if line
             and not line[0].isspace()}
    assert set(REGISTRY) <= names
    presets = list_presets()
    assert presets
    for name in presets:
        assert re.search(rf"^\s+{re.escape(name)}\s", result.stdout, re.MULTILINE), name


def test_info_reports_cpu_and_cuda_with_reason(cli):
    result = cli("info")
    assert_ok(result)
    assert f"streamconv {streamconv.__version__}" in result.stdout
    assert re.search(r"^\s*cpu: available", result.stdout, re.MULTILINE)
    usable, reason = cuda_status(0)
    line = next(ln for ln in result.stdout.splitlines() if ln.strip().startswith("cuda:"))
    assert line.strip() == f"cuda: {'available' if usable else 'unavailable'}: {reason}"
    assert reason.strip()


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"streamconv {streamconv.__version__}"


def test_help(cli):
    result = cli("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: streamconv")
    for command in ("run", "filters", "info"):
        assert command in result.stdout
    run_help = cli("run", "--help")
    assert run_help.returncode == 0
    assert "--pipeline" in run_help.stdout and "--max-frames" in run_help.stdout


# ---------------------------------------------------------------- signals


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_finishes_a_playable_file(tmp_path, signum, code):
    output = tmp_path / "out.mp4"

    def partial() -> bool:
        return any(tmp_path.glob(".out.*.partial.mp4"))

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen(
        [sys.executable, "-m", "streamconv", "run", "test:640x360@30,frames=100000", "-o",
         str(output), "--filter", "box:size=5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not partial() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert partial(), "the run never started writing"
        time.sleep(1.5)  # let it encode some frames
        assert process.poll() is None, process.communicate()[1]
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and "streamconv: error:" not in stderr, stderr
    assert "interrupted" in stderr
    summary = re.search(r"^(\d+) frames in ", stderr, re.MULTILINE)
    assert summary, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]
    with av.open(str(output)) as container:  # decodes to the end without an error
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (640, 360)
        decoded = sum(1 for _ in container.decode(stream))
    assert decoded > 0
    assert decoded == int(summary.group(1))


# ---------------------------------------------------------------- presets from files


def test_custom_preset_file(cli, tmp_path):
    preset = tmp_path / "mine.toml"
    preset.write_text('description = "my chain"\nborder = "zero"\n\n'
                      '[[filter]]\nname = "box"\nsize = 3\n\n'
                      '[[filter]]\nname = "custom"\ntaps = "0,1,0;1,-4,1;0,1,0"\n',
                      encoding="utf-8")
    options, suffix = lossless_rgb_encoder()
    output = tmp_path / f"out{suffix}"
    result = cli("run", "test:64x48,frames=4", "-o", str(output), *options, "--pipeline",
                 str(preset), "--backend", "cpu", "-q")
    assert_ok(result)
    backend = CpuBackend(parse_chain(["box:size=3", "custom:taps=0,1,0;1,-4,1;0,1,0"]),
                         border="zero")
    expected = [backend.apply(frame) for frame in streamconv.TestPattern(64, 48, frames=4)]
    got = decode_rgb(output)
    assert len(got) == 4
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(have, want)
    # a preset path relative to the working folder works too
    result = cli("run", TINY, "--pipeline", "mine.toml", "-q", cwd=tmp_path)
    assert_ok(result)


@pytest.mark.parametrize("text, fragments", [
    ('description = "x"\ncolour = "red"\n[[filter]]\nname = "box"\n', ["unknown key 'colour'"]),
    ('description = 5\n[[filter]]\nname = "box"\n', ["description must be a string"]),
    ('border = 3\n[[filter]]\nname = "box"\n', ["border must be a string"]),
    ('border = "wrap"\n[[filter]]\nname = "box"\n', ["wrap"]),
    ('filter = "box"\n', ["[[filter]]"]),
    ('description = "no stages"\n', ["[[filter]]"]),
    ('[[filter]]\nsize = 3\n', ["filter 1", "name"]),
    ('[[filter]]\nname = 7\n', ["filter 1", "name"]),
    ('[[filter]]\nname = "box"\n[[filter]]\nname = "box"\nsize = 4\n',
     ["filter 2", "size must be odd"]),
    ('[[filter]]\nname = "box"\nsize = true\n', ["filter 1", "expected an integer"]),
    ('[[filter]]\nname = "box"\nsize = 2.5\n', ["filter 1", "expected an integer"]),
    ('[[filter]]\nname = "gaussian"\nsigma = "wide"\n', ["filter 1", "expected a number"]),
    ('[[filter]]\nname = "box"\nradius = 2\n', ["filter 1", "unknown parameter 'radius'"]),
    ('[[filter]]\nname = "blurr"\n', ["filter 1", "unknown filter 'blurr'"]),
    ('[[filter]]\nname = "custom"\ntaps = "1,2;3"\n', ["filter 1", "different lengths"]),
    ('[[filter]]\nname = "box"\nsize = \n', ["not valid TOML"]),
], ids=["unknown-key", "description-type", "border-type", "border-value", "filter-not-table",
        "no-filter", "no-name", "name-type", "bad-size", "bool-size", "float-size", "sigma-type",
        "unknown-param", "unknown-filter", "ragged-taps", "bad-toml"])
def test_malformed_preset_exits_3(cli, tmp_path, text, fragments):
    preset = tmp_path / "bad.toml"
    preset.write_text(text, encoding="utf-8")
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--pipeline", str(preset))
    assert_error(result, 3, "bad.toml", *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_missing_preset_file_exits_3(cli, tmp_path):
    result = cli("run", TINY, "--pipeline", str(tmp_path / "absent.toml"))
    assert_error(result, 3, "preset file not found", "absent.toml")
