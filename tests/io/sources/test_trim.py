"""-ss, -t and -to on real clips, against the cut the ffmpeg program itself makes of them with
the video re-encoded and the audio copied: the same frames (count, pixels), the same frame
timestamps, the same audio packets (count, timestamps).

The reference is ``ffmpeg CUT -i IN -fps_mode passthrough -c:v ffv1 -c:a copy``: lossless, and
without the frame-rate conversion FFmpeg applies to MP4 outputs by default (streamconv never
duplicates or drops frames for a rate). Pixels are compared exactly on a lossless RGB clip
(streamconv's identity is exact there); on 4:2:0 clips, whose RGB round trip is not exact, each
frame must be nearest to the reference's frame of the same index.
"""

from __future__ import annotations

import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import assert_error, pipe_cli
from helpers.clips import write_av_clip
from streamconv.cli.parser import build_parser
from streamconv.cli.run import check_run_args
from streamconv.io.sources.trim import Trim, parse_time, rescale

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None, reason="the ffmpeg program is not installed "
                                                          "(.ci/run installs it)")
LOSSLESS_RGB = {"preset": "ultrafast", "g": "6", "qp": "0"}


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    """2 s at 25 fps with AAC audio: lossless RGB H.264 in MP4 (keyframe every 6 frames); 4:2:0
    H.264 with B-frames in MPEG-TS (a start time off the frame grid)."""
    folder = tmp_path_factory.mktemp("trim")
    rgb = {"codec": "libx264rgb", "pix_fmt": "bgr0", "options": LOSSLESS_RGB}
    return {"rgb.mp4": write_av_clip(folder / "rgb.mp4", **rgb),
            "yuv.ts": write_av_clip(folder / "yuv.ts")}


def contents(path: Path) -> tuple[list[Fraction], list[np.ndarray], list[Fraction]]:
    """A file's frame times, frames (RGB) and audio packet times, in seconds from the file's
    earliest timestamp.

    Counted from there because where a file's zero lies is the muxer's choice, which FFmpeg's
    versions make differently: a cut that starts on an AAC priming packet (pts -1024) is shifted
    to start at 0 by the Matroska muxer of libavformat 59 to 62 and kept at -21 ms by that of
    libavformat 63 (PyAV 19).
    """
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    with av.open(str(path)) as container:
        audio = [p.pts * p.time_base for p in container.demux(audio=0) if p.size]
    video = [f.pts * f.time_base for f in frames]
    zero = min(video[:1] + audio[:1])
    return ([t - zero for t in video], [f.to_ndarray(format="rgb24") for f in frames],
            [t - zero for t in audio])


def cut_both(source: Path, cut: list[str], folder: Path, *, pix_fmt: str, stdin: bool = False):
    """(FFmpeg's cut, streamconv's cut) of ``source`` (read from a pipe with ``stdin``), each as
    :func:`contents`."""
    reference, output = folder / "ffmpeg.mkv", folder / "streamconv.mkv"
    given = "-" if stdin else str(source)
    data = source.read_bytes() if stdin else b""
    subprocess.run([FFMPEG, "-v", "error", "-y", *cut, "-i", given, "-fps_mode", "passthrough",
                    "-c:v", "ffv1", "-c:a", "copy", str(reference)], input=data, check=True,
                   timeout=60)
    result = pipe_cli("run", given, *cut, "-o", str(output), "--filter", "identity", "--backend",
                      "cpu", "-c:v", "ffv1", "--pix-fmt", pix_fmt, "-q", "--no-progress",
                      stdin=data)
    said = result.stderr.decode()
    assert result.returncode == 0 and "error" not in said and "damage" not in said, said
    assert ("cannot seek" in said) == stdin, said  # a pipe is read from its start, and says so
    return contents(reference), contents(output)


@needs_ffmpeg
@pytest.mark.parametrize("cut", [["-ss", "0.5", "-t", "1"], ["-ss", "0.48", "-to", "1.2"],
                                 ["-t", "0.9"], ["-ss", "1.3"]])
def test_the_cut_is_ffmpegs_frame_for_frame_and_packet_for_packet(clips, tmp_path, cut):
    (times, frames, audio), (got_times, got_frames, got_audio) = cut_both(
        clips["rgb.mp4"], cut, tmp_path, pix_fmt="bgr0")
    assert 10 <= len(frames) < 50  # a cut, not the whole clip
    assert got_times == times
    assert len(got_frames) == len(frames)
    assert all(np.array_equal(a, b) for a, b in zip(got_frames, frames))
    assert got_audio == audio and len(audio) > 10


@needs_ffmpeg
@pytest.mark.parametrize("cut", [["-ss", "0.5", "-t", "1"], ["-ss", "1.1"]])
@pytest.mark.parametrize("piped", [False, True])
def test_a_transport_stream_with_b_frames_is_cut_alike(clips, tmp_path, cut, piped):
    """The TS demuxer seeks by dts (3/23 s earlier, as FFmpeg does for B-frames) and lands on any
    packet, or, from a pipe, cannot seek (every frame before the start is decoded and dropped);
    its start time is off the frame grid, so the cut's timestamps are rounded to it."""
    (times, frames, audio), (got_times, got_frames, got_audio) = cut_both(
        clips["yuv.ts"], cut, tmp_path, pix_fmt="yuv420p", stdin=piped)
    assert len(got_frames) == len(frames) >= 20
    assert got_times == times and got_audio == audio
    for index, frame in enumerate(got_frames):  # each nearest to the reference's same frame
        distances = [np.abs(frame.astype(int) - other).mean() for other in frames]
        assert int(np.argmin(distances)) == index and distances[index] < 4, distances[index]


def test_a_start_past_the_last_frame_is_named(clips, cli, tmp_path):
    """The seek lands on the last keyframe (frame 48 of 50): two frames are decoded, not 50."""
    output = tmp_path / "out.mkv"
    assert_error(cli("run", str(clips["rgb.mp4"]), "-ss", "9", "-o", str(output), "--backend",
                     "cpu"), 4, "has no frame at or after -ss 9 s (2 decoded before it)")
    assert not output.exists()


@pytest.mark.parametrize("argv, fragment", [
    (["in.mp4", "-t", "1", "-to", "2"], "-t and -to both say where the cut ends"),
    (["in.mp4", "-ss", "2", "-to", "1.5"], "-to 1.5 s is not after -ss 2 s"),
    (["in.mp4", "-t", "0"], "-t 0 leaves no frame"),
    (["in.mp4", "-ss", "1:xx"], "expected a time such as 90"),
    (["webcam", "-t", "5"], "cut video files and streams, not 'webcam'"),
    (["test:64x48", "-ss", "1"], "cut video files and streams, not 'test:64x48'"),
    (["rtsp://127.0.0.1/x", "-t", "5", "--reconnect"], "not with --reconnect"),
    (["in.mp4", "-ss", "1", "--segments", "2", "-o", "o.mp4"], "not with --segments"),
    (["in.mp4", "-ss", "1", "--decoder", "nvdec"], "not with --decoder nvdec"),
])
def test_cuts_that_cannot_be_made_are_usage_errors(argv, fragment, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit) as exited:
        args, extra = parser.parse_known_args(["run", *argv])
        check_run_args(args.command_parser, args, extra)
    assert exited.value.code == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize("text, microseconds", [
    ("90", 90_000_000), ("1.5", 1_500_000), ("500ms", 500_000), ("250us", 250), ("2s", 2_000_000),
    ("01:30", 90_000_000), ("1:02:03.25", 3_723_250_000), (".5", 500_000),
    ("0.0000019", 1),  # finer than a microsecond: cut off, as FFmpeg does
])
def test_times_are_read_as_ffmpeg_writes_them(text, microseconds):
    assert parse_time(text) == microseconds


@pytest.mark.parametrize("text", ["", "-1", "1:2:3:4", "1e3", "abc", "1.5h"])
def test_other_times_are_refused(text):
    with pytest.raises(ValueError):
        parse_time(text)


def test_rescaling_rounds_halves_away_from_zero_as_ffmpeg():
    assert rescale(1, Fraction(1, 50), Fraction(1, 25)) == 1  # 0.5 tick
    assert rescale(-1, Fraction(1, 50), Fraction(1, 25)) == -1
    assert rescale(-480_000, Fraction(1, 1_000_000), Fraction(1, 12800)) == -6144
    assert Trim.of(stop=2_000_000) == Trim(None, 2_000_000)
    assert Trim.of(1_000_000, stop=2_500_000) == Trim(1_000_000, 1_500_000)
    assert Trim.of() is None


def test_a_cut_opens_from_python(clips):
    from streamconv.errors import InputError
    from streamconv.io.open import open_source

    trim = Trim.of(parse_time("0.5"), parse_time("1"))
    with open_source(str(clips["rgb.mp4"]), trim=trim) as source:
        assert source.frame_count == 25 and "from 0.5 s for 1 s" in source.describe()
        metas = [source.read_into(np.empty(source.shape, source.dtype)) for _ in range(26)]
    assert metas[-1] is None  # 25 frames, then the end of the cut
    # the first frame kept, 0.52 s, is 0.02 s into the cut: half a 1/25 s tick, rounded up
    assert [(m.pts, m.time_base) for m in metas[:2]] == [(1, Fraction(1, 25)), (2, Fraction(1, 25))]
    with pytest.raises(InputError, match="is of a file or stream read once"):
        open_source("test:64x48,frames=5", trim=trim)
