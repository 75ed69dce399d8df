"""Stages across frames on real files through ``streamconv run`` (CPU backend): the frame count,
the timestamps and the audio stay the input's, and a first signal still flushes the window."""

from __future__ import annotations

import signal

import av
import numpy as np

from streamconv.chain.filters import parse_chain

from helpers.oracle import reference_clip
from helpers.processes import Run
from helpers.streamcopy import audio_packets, make_clip
from helpers.temporal import rgb_frames


def video_pts(path) -> list[int]:
    with av.open(str(path)) as container:
        return [frame.pts for frame in container.decode(video=0)]


def test_a_temporal_chain_keeps_frames_timestamps_and_audio(cli, tmp_path):
    source, out = tmp_path / "in.mp4", tmp_path / "out.mp4"
    make_clip(source, frames=12)
    result = cli("run", str(source), "-o", str(out), "--filter", "tmean:frames=5",
                 "--filter", "box", "--backend", "cpu", "--no-progress", "-v")
    assert result.returncode == 0, result.stderr
    assert "2 frame(s)" in result.stderr and "behind the input" in result.stderr
    assert video_pts(out) == video_pts(source) and len(video_pts(out)) == 12
    assert audio_packets(out) == audio_packets(source)


def lossless_rgb_clip(path, frames: int, rate: int) -> None:
    """FFV1 in RGB (bgr0): decoded back to rgb24 bit for bit."""
    rng = np.random.default_rng(5)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "bgr0"
        for index in range(frames):
            picture = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def test_a_first_signal_flushes_the_window_of_the_frames_read(tmp_path):
    """Stopped mid-stream, the output has one frame per frame read, the last ones computed with
    the stream ending at the last frame read, as if the input had ended there."""
    source, out = tmp_path / "in.mkv", tmp_path / "out.mkv"
    lossless_rgb_clip(source, 90, 30)
    specs = ["tmean:frames=9"]
    run = Run("run", str(source), "-o", str(out), "--filter", specs[0], "--backend", "cpu",
              "--codec", "ffv1", "--pix-fmt", "bgr0", "--colour", "host", "--realtime",
              "--progress", str(tmp_path / "progress.txt"), "--no-progress", cwd=tmp_path)
    run.wait_for(lambda: _written(tmp_path / "progress.txt") >= 10, "ten frames written")
    run.process.send_signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr
    got, clip = rgb_frames(out), rgb_frames(source)
    assert 14 <= len(got) < 90, len(got)  # 4 frames behind when stopped, and the 4 flushed
    expected = reference_clip(clip[:len(got)], parse_chain(specs), "reflect101")
    np.testing.assert_array_equal(got, expected)


def _written(path) -> int:
    """The last ``frame=`` count of a progress file (0 before one)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    counts = [int(line[6:]) for line in lines if line.startswith("frame=") and line[6:].isdigit()]
    return counts[-1] if counts else 0


def test_a_taps_file_the_chain_reads_is_never_written_over(cli, tmp_path):
    """conv3d's file= is an input of the run: --overwrite does not let the output, --stats-json,
    --progress or --report replace it, as it does not for SOURCE."""
    source, taps = tmp_path / "in.mp4", tmp_path / "taps.npy"
    make_clip(source, frames=4)
    np.save(taps, np.full((3, 1, 1), 1 / 3))
    before = taps.read_bytes()
    for option in (("-o", str(taps), "--format", "matroska"), ("--stats-json", str(taps)),
                   ("--progress", str(taps)), ("--report", str(taps))):
        result = cli("run", str(source), *option, "--filter", f"conv3d:file={taps}",
                     "--backend", "cpu", "--no-progress", "--overwrite")
        assert result.returncode == 6, (option, result.stderr)
        assert "same file as conv3d's file" in result.stderr, result.stderr
        assert taps.read_bytes() == before
    # several sources: each through the chain, one output each
    result = cli("run", str(source), str(source), "-o", str(tmp_path / "out{n}.mkv"),
                 "--stats-json", str(taps), "--filter", f"conv3d:file={taps}", "--backend", "cpu",
                 "--no-progress", "--overwrite")
    assert result.returncode == 6 and "conv3d's file" in result.stderr, result.stderr
    assert taps.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "taps.npy"]
