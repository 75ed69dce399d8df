"""Standard input and output: a container or raw frames piped in, a container or raw frames piped
out, nothing but the video on stdout; and run's own usage for what ffmpeg users type."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import REPO, assert_error, assert_ok, pipe_cli
from helpers.clips import write_clip

W, H = 64, 48


def decoded(data: bytes, **open_options) -> tuple[str, list[av.VideoFrame], Fraction]:
    """(container format, frames, video time base) of a container held in ``data``."""
    with av.open(io.BytesIO(data), **open_options) as container:
        stream = container.streams.video[0]
        return container.format.name, list(container.decode(stream)), Fraction(stream.time_base)


def raw_frames(count: int, seed: int = 7) -> np.ndarray:
    """``count`` random (H, W, 3) uint8 RGB frames."""
    return np.random.default_rng(seed).integers(0, 256, (count, H, W, 3), dtype=np.uint8)


def ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr and \
        b"streamconv: error:" not in result.stderr, result.stderr


def test_a_container_on_stdin_comes_out_on_stdout_as_matroska_frame_for_frame(cli, tmp_path):
    clip = write_clip(tmp_path / "in.mkv", frames=8, size=(W, H))
    _, expected, base = decoded(clip.read_bytes())
    options = ["--filter", "identity", "--backend", "cpu", "--crf", "0"]
    result = pipe_cli("run", "-", "-o", "-", *options, stdin=clip.read_bytes())
    ok(result)
    assert result.stdout[:4] == b"\x1a\x45\xdf\xa3"  # EBML: the first byte is the container's
    assert b"p50" in result.stderr  # the summary table went to stderr
    name, frames, out_base = decoded(result.stdout)
    assert "matroska" in name and len(frames) == 8
    assert (frames[0].width, frames[0].height) == (W, H)
    assert [f.pts * out_base for f in frames] == [f.pts * base for f in expected]
    # The same run into a file gives the same pictures; both are the input's within the loss of
    # subsampling random chroma twice (RGB to yuv420p and back in the reader, again in the writer).
    assert_ok(cli("run", str(clip), "-o", str(tmp_path / "out.mkv"), *options, "-q",
                  "--no-progress"))
    _, from_file, _ = decoded((tmp_path / "out.mkv").read_bytes())
    for got, same, want in zip(frames, from_file, expected):
        assert np.array_equal(got.to_ndarray(), same.to_ndarray())
        diff = np.abs(got.to_ndarray(format="rgb24").astype(int) - want.to_ndarray(format="rgb24"))
        assert diff.mean() < 6, diff.mean()


@pytest.mark.parametrize("spec", ["-", "pipe:0"])
def test_format_names_the_container_on_stdout(tmp_path, spec):
    clip = write_clip(tmp_path / "in.ts", frames=5, size=(W, H))
    result = pipe_cli("run", spec, "-o", "pipe:1", "--format", "mpegts", "--backend", "cpu", "-q",
                      stdin=clip.read_bytes())
    ok(result)
    assert result.stdout[0] == 0x47  # an MPEG-TS sync byte
    name, frames, _ = decoded(result.stdout)
    assert name == "mpegts" and len(frames) == 5


def test_raw_frames_in_and_out_are_exact_through_identity():
    frames = raw_frames(6)
    result = pipe_cli("run", "-", "--input-format", "rawvideo", "--size", f"{W}x{H}",
                      "--input-pix-fmt", "rgb24",
                      "--fps", "25", "--filter", "identity", "--backend", "cpu", "-q",
                      "-o", "-", "--format", "rawvideo", "--pix-fmt", "rgb24",
                      stdin=frames.tobytes())
    ok(result)
    assert len(result.stdout) == frames.nbytes
    assert np.array_equal(np.frombuffer(result.stdout, np.uint8).reshape(frames.shape), frames)


def test_raw_frames_in_become_a_playable_stream_at_the_rate_given():
    frames = raw_frames(5)
    result = pipe_cli("run", "-", "--input-format", "rawvideo", "--size", f"{W}x{H}",
                      "--input-pix-fmt", "rgb24",
                      "--fps", "10", "--filter", "box:size=3", "--backend", "cpu", "-q", "-o", "-",
                      stdin=frames.tobytes())
    ok(result)
    _, out, base = decoded(result.stdout)
    assert len(out) == 5 and (out[0].width, out[0].height) == (W, H)
    assert [f.pts * base for f in out] == [Fraction(i, 10) for i in range(5)]


def test_raw_video_cut_inside_a_frame_keeps_the_whole_frames_and_names_the_cut():
    """The bytes after the last whole frame are damage (exit 13, every whole frame written); with
    no whole frame, exit 4; either names the cut, not the decoder's "Invalid argument"."""
    frames = raw_frames(3)
    raw = ["run", "-", "--input-format", "rawvideo", "--size", f"{W}x{H}", "--input-pix-fmt",
           "rgb24",
           "--filter", "identity", "--backend", "cpu", "-q", "-o", "-", "--format", "rawvideo",
           "--pix-fmt", "rgb24"]
    cut = f"the input ends inside a frame: its last 100 bytes are less than a {W}x{H} rgb24 frame"
    result = pipe_cli(*raw, stdin=frames.tobytes() + bytes(100))
    assert result.returncode == 13 and cut in result.stderr.decode(), result.stderr.decode()
    assert np.array_equal(np.frombuffer(result.stdout, np.uint8).reshape(frames.shape), frames)
    result = pipe_cli(*raw, stdin=bytes(100))
    assert result.returncode == 4 and \
        f"no frame could be decoded from pipe:0 ({cut}" in result.stderr.decode()


def test_a_raw_video_size_over_max_pixels_is_refused_naming_the_limit():
    """The size given is the frames' declared size: refused as a file's, not with FFmpeg's
    "Invalid argument" for a size past its own limit."""
    result = pipe_cli("run", "-", "--input-format", "rawvideo", "--size", "99999x99999",
                      "--backend", "cpu", stdin=bytes(100))
    assert_error(subprocess.CompletedProcess(result.args, result.returncode, "",
                                             result.stderr.decode()),
                 4, "pipe:0 has 99999x99999 frames", "--max-pixels")


def test_raw_video_opens_from_python_with_its_size_format_and_rate(tmp_path):
    from streamconv.io.open import open_source

    frames = raw_frames(3)
    raw = tmp_path / "frames.rgb"
    raw.write_bytes(frames.tobytes())
    with open_source(str(raw), format="rawvideo", size=(W, H), pix_fmt="rgb24", fps=50) as source:
        assert source.shape == (H, W, 3) and source.frame_rate == 50
        got = list(source)
    assert np.array_equal(np.stack(got), frames)


def test_garbage_on_stdin_exits_4_naming_standard_input():
    # A fixed draw: a fresh random one now and then probes as an audio-only
    # format, which is exit 5 ("no video stream"), a different case.
    garbage = np.random.default_rng(0).bytes(4096)
    result = pipe_cli("run", "-", "--backend", "cpu", "-q", stdin=garbage)
    assert result.returncode == 4, result.stderr
    assert b"pipe:0" in result.stderr and b"Traceback" not in result.stderr
    assert result.stdout == b""


@pytest.mark.parametrize("args, fragment", [
    (["-o", "-", "--progress", "-"], "would both write to standard output"),
    (["-o", "-", "--progress", "/dev/stdout"], "would both write to standard output"),
    (["-o", "pipe:1", "--progress", "/dev/fd/1"], "would both write to standard output"),
    (["--stats-json", "-"], "--stats-json names a file, not standard output"),  # was a file named -
    (["-o", "-", "--stats-json", "pipe:1"], "--stats-json names a file, not standard output"),
    (["--input-format", "rawvideo"], "needs the frames' --size WxH"),
    (["--input-pix-fmt", "rgb24"],
     "--input-pix-fmt is the pixel format of --input-format rawvideo"),
    (["--size", "64x48"], "--size and --fps apply to cameras"),
    (["--input-format", "no-such-demuxer"], "FFmpeg has no demuxer 'no-such-demuxer'"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
def test_pipe_options_that_cannot_work_are_usage_errors(args, fragment):
    result = pipe_cli("run", "-", "--backend", "cpu", *args)
    assert result.returncode == 2, result.stderr
    assert fragment.encode() in result.stderr and \
        result.stderr.startswith(b"usage: streamconv run ")
    assert result.stdout == b""


def test_dash_i_is_the_source_as_ffmpeg_users_type_it(cli, tmp_path):
    clip = write_clip(tmp_path / "in.mkv", frames=4, size=(W, H))
    out = tmp_path / "out.mkv"
    assert_ok(cli("run", "-i", str(clip), "-o", str(out), "--backend", "cpu", "-q",
                  "--no-progress"))
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 4


@pytest.mark.parametrize("args, fragment", [
    (["IN", "OUT"], "one SOURCE only, got 'IN' and 'OUT'; name the output with -o OUTPUT"),
    (["-i", "IN", "OUT"], "one SOURCE only, got 'IN' and 'OUT'"),
    (["IN", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ([], "SOURCE is missing"),
], ids=["two-positionals", "dash-i-and-a-positional", "unknown-option", "no-source"])
def test_what_run_cannot_take_gets_runs_own_usage(cli, tmp_path, args, fragment):
    clip = write_clip(tmp_path / "in.mkv", frames=2, size=(W, H))
    names = {"IN": str(clip), "OUT": str(tmp_path / "out.mkv")}
    result = cli("run", *[names.get(arg, arg) for arg in args])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("usage: streamconv run "), result.stderr  # not the top level's
    assert fragment.replace("'IN'", repr(str(clip))).replace("'OUT'",
                                                             repr(names["OUT"])) in result.stderr
    assert not Path(names["OUT"]).exists()


def test_deep_input_to_a_codec_without_deep_formats_suggests_only_what_it_takes(cli, tmp_path):
    if "mpeg4" not in av.codecs_available:
        pytest.skip("this FFmpeg has no mpeg4 encoder")
    clip = write_clip(tmp_path / "in.mkv", pix_fmt="yuv420p10le", frames=3, size=(W, H))
    result = cli("run", str(clip), "-o", str(tmp_path / "out.mkv"), "--codec", "mpeg4", "--backend",
                 "cpu", "-q", "--no-progress")
    assert_ok(result)
    assert "yuv420p10le" not in result.stderr.replace(f"{clip}", "")  # mpeg4 refuses it
    assert "libx264" in result.stderr  # a codec that keeps the depth
    refused = cli("run", str(clip), "-o", str(tmp_path / "b.mkv"), "--codec", "mpeg4", "--pix-fmt",
                  "yuv420p10le", "--backend", "cpu", "-q", "--no-progress")
    assert_error(refused, 6, "does not support pixel format 'yuv420p10le'", "it takes: yuv420p")


def test_a_pipe_that_is_a_terminal_is_a_usage_error_before_any_work(tmp_path):
    """-o - with standard output a terminal (a real pseudo-terminal here) would print the video's
    bytes there, and SOURCE - with standard input one would wait for a stream to be typed: both are
    usage errors naming what to do, and nothing reaches the terminal."""
    import pty

    clip = write_clip(tmp_path / "in.mp4", frames=4, size=(W, H))
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for args, fd in ((("run", str(clip), "-o", "-", "--backend", "cpu", "--filter", "edge"),
                      "stdout"),
                     (("run", "-", "-o", str(tmp_path / "out.mp4"), "--backend", "cpu"), "stdin")):
        leader, follower = pty.openpty()
        try:
            ends = {"stdout": follower, "stdin": subprocess.DEVNULL} if fd == "stdout" else \
                {"stdin": follower, "stdout": subprocess.PIPE}
            result = subprocess.run([sys.executable, "-m", "streamconv", *args],
                                    stderr=subprocess.PIPE, timeout=120, env=env, **ends)
            os.set_blocking(leader, False)
            try:
                shown = os.read(leader, 65536)
            except BlockingIOError:
                shown = b""
        finally:
            os.close(leader)
            os.close(follower)
        assert result.returncode == 2 and b"terminal" in result.stderr, (fd, result.stderr)
        assert shown == b"", shown[:80]
    assert not (tmp_path / "out.mp4").exists()


def test_a_raw_video_file_of_another_frame_size_is_refused_before_any_frame(cli, tmp_path):
    """A wrong --size would read the file as frames of noise: a file's length that is no whole
    number of frames of the size given is refused (exit 4), naming both lengths."""
    raw = tmp_path / "frames.yuv"
    length = 3 * W * H * 3 // 2  # three yuv420p frames
    raw.write_bytes(np.random.default_rng(3).integers(0, 256, length, np.uint8).tobytes())
    output = tmp_path / "out.mkv"
    options = ["--input-format", "rawvideo", "--backend", "cpu", "-q", "-o", str(output)]
    assert_error(cli("run", str(raw), "--size", f"{W - 4}x{H}", *options), 4,
                 f"its {length} bytes are no whole number of {W - 4}x{H} yuv420p frames "
                 f"({(W - 4) * H * 3 // 2} bytes each)")
    assert not output.exists()
    as_rgb = ["--size", f"{W}x{H}", "--input-pix-fmt", "rgb24"]
    assert_error(cli("run", str(raw), *as_rgb, *options), 4, f"no whole number of {W}x{H} rgb24")
    assert_ok(cli("run", str(raw), "--size", f"{W}x{H}", *options))
    with av.open(str(output)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 3
