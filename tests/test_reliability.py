"""Failures a long run meets in the field, each produced for real and each with its own exit
code and streamconv's own message: a full disk, frames too large for the limits, damaged
and odd input, a stalled network source. Every fixture is generated here (PyAV, NumPy,
byte surgery); the table of cases is in docs/reliability.md.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu import CpuBackend
from streamconv.filters import parse_chain

from oracle import reference_chain
from test_cli import assert_error, assert_ok

REPO = Path(__file__).resolve().parent.parent


def run_limited(args: list[str], *, file_size: int, cwd: Path) -> subprocess.CompletedProcess:
    """Run the CLI with the kernel refusing writes past ``file_size`` bytes per file (EFBIG),
    which an encoder meets exactly as it meets a full disk: a failed write() mid-stream."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "streamconv", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd, preexec_fn=limit)


# ---------------------------------------------------------------- output


@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_full_disk_reports_what_was_written_and_leaves_no_partial_file(tmp_path, existing):
    output = tmp_path / "out.mkv"
    if existing:
        output.write_bytes(b"an older output")
    result = run_limited(["run", "test:320x240,frames=300", "-o", str(output), "--filter", "box",
                          "--codec", "ffv1", "--backend", "cpu", "--no-progress", "-q", "--overwrite"],
                         file_size=300_000, cwd=tmp_path)
    message = assert_error(result, 6, f"writing {output} failed after", "MiB written",
                           "the incomplete file was removed")
    frames = int(message.split("failed after ")[1].split()[0])
    assert 0 < frames < 300, message
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out.mkv"] if existing else [])
    if existing:
        assert output.read_bytes() == b"an older output"


# ---------------------------------------------------------------- limits


def test_frames_over_max_pixels_are_refused_before_any_buffer(tmp_path, monkeypatch):
    allocations = []
    real = CpuBackend.allocate_slots
    monkeypatch.setattr(CpuBackend, "allocate_slots",
                        lambda self, *a, **k: allocations.append(a) or real(self, *a, **k))
    with pytest.raises(streamconv.InputError, match=r"640x360 frames .* over the limit of 230399 pixels"):
        streamconv.Pipeline("test:640x360,frames=2", ["box"], backend="cpu", max_pixels=640 * 360 - 1)
    assert allocations == []
    stats = streamconv.Pipeline("test:640x360,frames=2", ["box"], backend="cpu",
                                max_pixels=640 * 360).run()
    assert stats.frames == 2 and len(allocations) == 1


@pytest.mark.parametrize("limit", ["1000", "63x47"])
def test_cli_max_pixels_refuses_a_file_before_decoding(cli, tmp_path, sample_clip, limit):
    result = cli("run", str(sample_clip), "-o", str(tmp_path / "out.mp4"), "--max-pixels", limit,
                 "--backend", "cpu")
    assert_error(result, 4, "640x360 frames", "--max-pixels")
    assert list(tmp_path.iterdir()) == []


def test_cli_max_pixels_zero_means_no_limit_and_bad_values_are_usage_errors(cli):
    assert_ok(cli("run", "test:64x48,frames=2", "--max-pixels", "0", "--backend", "cpu", "-q"))
    result = cli("run", "test:64x48,frames=2", "--max-pixels", "lots")
    assert result.returncode == 2 and "--max-pixels" in result.stderr


# ---------------------------------------------------------------- odd streams


def encode_ts(width: int, height: int, frames: int, first_pts: int, rng: np.random.Generator) -> bytes:
    """An H.264 MPEG-TS segment of random frames, pts first_pts.. in 1/30 s."""
    import io
    from fractions import Fraction

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, 30)
        stream.options = {"preset": "ultrafast", "qp": "0"}
        for index in range(frames):
            image = rng.integers(0, 256, (height, width, 3), np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = first_pts + index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


@pytest.fixture
def resizing_clip(tmp_path, rng) -> Path:
    """A TS file whose frames go from 64x48 to 96x64 at frame 6 (two segments end to end)."""
    path = tmp_path / "resizing.ts"
    path.write_bytes(encode_ts(64, 48, 6, 0, rng) + encode_ts(96, 64, 6, 6, rng))
    return path


def test_a_size_change_mid_stream_resizes_the_slots(resizing_clip):
    with streamconv.FileSource(resizing_clip) as source:
        frames = list(source)
    assert [f.shape for f in frames] == [(48, 64, 3)] * 6 + [(64, 96, 3)] * 6
    seen = []
    stats = streamconv.Pipeline(resizing_clip, ["box"], backend="cpu", ring=2,
                                on_frame=lambda frame, meta: seen.append(frame.copy())).run()
    assert stats.frames == 12 and stats.resizes == 1
    expected = [reference_chain(frame, parse_chain(["box"]), "reflect101") for frame in frames]
    assert [f.shape for f in seen] == [f.shape for f in expected]
    for index, (got, want) in enumerate(zip(seen, expected)):
        np.testing.assert_array_equal(got, want, err_msg=f"frame {index}")


@pytest.mark.parametrize("colour", ["host", "backend"])
def test_a_file_output_keeps_its_size_and_scales_frames_of_a_new_size(resizing_clip, tmp_path, colour):
    with streamconv.FileSource(resizing_clip) as source:
        frames = list(source)
    with av.open(str(resizing_clip)) as container:
        pts = [frame.pts for frame in container.decode(video=0)]
    output = tmp_path / "out.mkv"
    stats = streamconv.Pipeline(resizing_clip, ["box"], output, backend="cpu", colour=colour,
                                sink_options={"codec": "ffv1", "pix_fmt": "bgr0"}).run()
    assert stats.frames == 12 and stats.resizes == 1
    with av.open(str(output)) as container:
        decoded = list(container.decode(video=0))
        time_base = container.streams.video[0].time_base
    assert [(f.width, f.height) for f in decoded] == [(64, 48)] * 12
    input_base = av.open(str(resizing_clip)).streams.video[0].time_base
    assert [f.pts for f in decoded] == [round(p * input_base / time_base) for p in pts]  # mkv: 1 ms
    chain = parse_chain(["box"])
    for index, (frame, got) in enumerate(zip(frames, decoded)):
        want = reference_chain(frame, chain, "reflect101")
        if index >= 6:
            want = cv2.resize(want, (64, 48), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(got.to_ndarray(format="rgb24"), want, err_msg=f"frame {index}")


# ---------------------------------------------------------------- damaged input

CLIP_FRAMES = 48


def write_clip(path: Path, options: dict | None = None) -> Path:
    """48 frames of 160x120 H.264 at 24 fps (a keyframe every 12) with an AAC track."""
    from fractions import Fraction

    with av.open(str(path), "w", options=options or {}) as container:
        video = container.add_stream("libx264", rate=24)
        video.width, video.height, video.pix_fmt = 160, 120, "yuv420p"
        video.options = {"preset": "veryfast", "g": "12"}
        audio = container.add_stream("aac", rate=48000)
        audio.layout = "stereo"
        ys, xs = np.mgrid[0:120, 0:160]
        samples = 0
        for index in range(CLIP_FRAMES):
            image = np.stack([(xs * 2 + 5 * index) % 256, (ys * 3 + 7 * index) % 256,
                              (xs + ys + 11 * index) % 256], axis=-1).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, 24)
            for packet in video.encode(frame):
                container.mux(packet)
            while samples < (index + 1) * 2000:
                tone = (0.2 * np.sin(2 * np.pi * 440 * (np.arange(1024) + samples) / 48000)).astype(np.float32)
                chunk = av.AudioFrame.from_ndarray(np.stack([tone, tone]), format="fltp", layout="stereo")
                chunk.sample_rate, chunk.pts = 48000, samples
                for packet in audio.encode(chunk):
                    container.mux(packet)
                samples += 1024
        for stream in (video, audio):
            for packet in stream.encode(None):
                container.mux(packet)
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, bytes]:
    """The clip's bytes as MP4 (index at the end), MP4 faststart, MKV and MPEG-TS."""
    folder = tmp_path_factory.mktemp("clips")
    made = {"mp4": write_clip(folder / "clip.mp4"),
            "faststart.mp4": write_clip(folder / "faststart.mp4", {"movflags": "faststart"}),
            "mkv": write_clip(folder / "clip.mkv"), "ts": write_clip(folder / "clip.ts")}
    return {name: path.read_bytes() for name, path in made.items()}


def decodable_frames(path: Path) -> int:
    """Frames PyAV decodes from ``path``, skipping packets that fail, as the pipeline must."""
    count = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for packet in container.demux(stream):
            try:
                count += len(packet.decode())
            except av.InvalidDataError:
                pass
    return count


def flip_bytes(data: bytes, places: int = 4, length: int = 300) -> bytes:
    """XOR 0xFF over ``places`` runs of ``length`` bytes spread through the middle of the file."""
    damaged = bytearray(data)
    for number in range(places):
        start = len(data) * (number + 2) // (places + 3)
        damaged[start:start + length] = bytes(b ^ 0xFF for b in damaged[start:start + length])
    return bytes(damaged)


def run_file(cli, tmp_path: Path, name: str, data: bytes):
    """Write ``data`` as input ``name`` and run it through a box filter into out.mkv."""
    source = tmp_path / name
    source.write_bytes(data)
    return source, cli("run", str(source), "-o", str(tmp_path / "out.mkv"), "--filter", "box",
                       "--backend", "cpu", "--no-progress", "-q")


@pytest.mark.parametrize("name, data", [
    ("empty.mp4", b""),
    ("random.mp4", np.random.default_rng(1).bytes(10_000)),
    ("random.ts", np.random.default_rng(2).bytes(10_000)),
], ids=["empty", "random-mp4", "random-ts"])
def test_unreadable_input_exits_4_and_writes_nothing(cli, tmp_path, name, data):
    _, result = run_file(cli, tmp_path, name, data)
    assert_error(result, 4, "cannot open input")
    assert not (tmp_path / "out.mkv").exists()


def test_truncated_mp4_with_its_index_at_the_end_is_unreadable(cli, tmp_path, clips):
    _, result = run_file(cli, tmp_path, "cut.mp4", clips["mp4"][: len(clips["mp4"]) // 2])
    assert_error(result, 4, "cannot open input")
    assert not (tmp_path / "out.mkv").exists()


def test_a_file_with_no_decodable_frame_exits_4_and_leaves_no_output(cli, tmp_path, clips):
    data = clips["faststart.mp4"]
    mdat = data.index(b"mdat") + 4
    _, result = run_file(cli, tmp_path, "headers-only.mp4", data[: mdat + 64])
    assert_error(result, 4, "no frame could be decoded")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["headers-only.mp4"]


@pytest.mark.parametrize("kind, damage, expected", [
    ("faststart.mp4", "cut", "(truncated)"),
    ("mkv", "cut", "(truncated)"),
    ("ts", "cut", "FFmpeg reported damage"),
    ("mp4", "flip", "could not be decoded and were skipped"),
    ("ts", "flip", "concealed by the decoder"),
])
def test_partly_damaged_input_keeps_every_decodable_frame_and_exits_13(cli, tmp_path, clips, kind, damage,
                                                                        expected):
    data = clips[kind]
    data = data[: len(data) // 2] if damage == "cut" else flip_bytes(data)
    source, result = run_file(cli, tmp_path, f"damaged.{kind}", data)
    assert result.returncode == 13, result.stderr
    assert "Traceback" not in result.stderr and "streamconv: error:" not in result.stderr, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "input damaged:" in line)
    assert expected in warning, warning
    frames = decodable_frames(source)
    assert 0 < frames <= CLIP_FRAMES
    assert f"every frame that decoded was processed ({frames})" in warning
    with av.open(str(tmp_path / "out.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) == frames
        assert len(container.streams.audio) == 1  # the audio that survived is copied too


@pytest.mark.parametrize("kind", ["mp4", "faststart.mp4", "mkv", "ts"])
def test_intact_input_reports_no_damage(cli, tmp_path, clips, kind):
    _, result = run_file(cli, tmp_path, f"clip.{kind}", clips[kind])
    assert_ok(result)
    assert "damaged" not in result.stderr
