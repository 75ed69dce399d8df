"""Failures a long run meets in the field, each produced for real and each with its own exit
code and streamconv's own message: a full disk, frames too large for the limits, damaged
and odd input, a stalled network source. Every fixture is generated here (PyAV, NumPy,
byte surgery); the table of cases is in docs/reliability.md.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import parse_chain

from helpers.cli import REPO, assert_error, assert_ok, run_limited
from helpers.clips import encode_ts, write_clip as write_moving_clip
from helpers.containers import CLIP_FRAMES, write_clip
from helpers.damage import decodable_frames, flip_bytes
from helpers.oracle import reference_chain
from helpers.processes import resident_bytes



# ---------------------------------------------------------------- output


@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_full_disk_reports_what_was_written_and_leaves_no_partial_file(tmp_path, existing):
    output = tmp_path / "out.mkv"
    if existing:
        output.write_bytes(b"an older output")
    result = run_limited(["run", "test:320x240,frames=300", "-o", str(output), "--filter", "box",
                          "--codec", "ffv1", "--backend", "cpu", "--no-progress", "-q",
                          "--overwrite"],
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
    with pytest.raises(streamconv.InputError,
                       match=r"640x360 frames .* over the limit of 230399 pixels"):
        streamconv.Pipeline("test:640x360,frames=2", ["box"], backend="cpu",
                            max_pixels=640 * 360 - 1)
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
def test_a_file_output_keeps_its_size_and_scales_frames_of_a_new_size(resizing_clip, tmp_path,
                                                                      colour):
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
        np.testing.assert_array_equal(got.to_ndarray(format="rgb24"), want,
                                      err_msg=f"frame {index}")


# ---------------------------------------------------------------- damaged input

@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, bytes]:
    """The clip's bytes as MP4 (index at the end), MP4 faststart, MKV and MPEG-TS."""
    folder = tmp_path_factory.mktemp("clips")
    made = {"mp4": write_clip(folder / "clip.mp4"),
            "faststart.mp4": write_clip(folder / "faststart.mp4", {"movflags": "faststart"}),
            "mkv": write_clip(folder / "clip.mkv"), "ts": write_clip(folder / "clip.ts")}
    return {name: path.read_bytes() for name, path in made.items()}


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
    # which one: FFmpeg's version
    ("ts", "flip", "concealed by the decoder|FFmpeg reported damage"),
])
def test_partly_damaged_input_keeps_every_decodable_frame_and_exits_13(cli, tmp_path, clips, kind,
                                                                       damage,
                                                                        expected):
    data = clips[kind]
    data = data[: len(data) // 2] if damage == "cut" else flip_bytes(data)
    source, result = run_file(cli, tmp_path, f"damaged.{kind}", data)
    assert result.returncode == 13, result.stderr
    assert "Traceback" not in result.stderr and \
        "streamconv: error:" not in result.stderr, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "input damaged:" in line)
    assert any(kind in warning for kind in expected.split("|")), warning
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


# ---------------------------------------------------------------- network stall


class StallingServer:
    """A loopback HTTP server that sends the first ``sent`` bytes of ``data`` (with headers
    announcing all of it, as a live stream would) and then goes silent, connection open."""

    def __init__(self, data: bytes, sent: int | None) -> None:
        import socket
        import threading

        self.data, self.sent = data, sent
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._connections: list = []
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/live.ts"

    def _serve(self) -> None:
        import threading

        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection) -> None:
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                request += chunk
            if self.sent is None:
                return  # never answers
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: "
                               b"video/mp2t\r\n\r\n" + self.data[: self.sent])
        except OSError:
            pass

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for connection in self._connections:
            connection.close()


def test_a_network_source_that_stalls_times_out_and_keeps_what_it_sent(cli, tmp_path, clips):
    import time

    server = StallingServer(clips["ts"], len(clips["ts"]) // 2)
    try:
        started = time.monotonic()
        result = cli("run", server.url, "-o", str(tmp_path / "out.mkv"), "--filter", "box",
                     "--timeout", "1", "--backend", "cpu", "--no-progress", "-q", timeout=60)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    message = assert_error(result, 8, "reading http://127.0.0.1", "no data within the 1 s timeout")
    frames = int(message.split("failed after ")[1].split()[0])
    assert 0 < frames < CLIP_FRAMES and elapsed < 30, (message, elapsed)
    with av.open(str(tmp_path / "out.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) >= frames  # frames so far are kept


def test_a_network_source_that_never_answers_exits_4(cli, tmp_path):
    server = StallingServer(b"", None)
    try:
        result = cli("run", server.url, "-o", str(tmp_path / "out.mkv"), "--timeout", "1",
                     "--backend", "cpu", "--no-progress", "-q", timeout=60)
    finally:
        server.close()
    assert_error(result, 4, "cannot open input", "no data within the 1 s timeout")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- timestamps, rotation, streams


def write_intra_mkv(path: Path, pts: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    """An MKV of lossless intra-only frames (FFV1, 1 ms time base) with exactly these pts."""
    from fractions import Fraction

    images = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in pts]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "bgr0"
        stream.codec_context.time_base = Fraction(1, 1000)
        for image, stamp in zip(images, pts):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="bgr0")
            frame.pts, frame.time_base = stamp, Fraction(1, 1000)
            for packet in stream.encode(frame):
                packet.pts = packet.dts = stamp  # as given, even a duplicate
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return images


def output_pts(path: Path) -> list[float]:
    """Each video frame's time in seconds."""
    with av.open(str(path)) as container:
        return [float(frame.time) for frame in container.decode(video=0)]


def test_variable_frame_rate_timestamps_are_kept(tmp_path, rng):
    stamps = [0, 33, 50, 120, 121, 300, 310, 700, 701, 702]
    source = tmp_path / "vfr.mkv"
    images = write_intra_mkv(source, stamps, rng)
    output = tmp_path / "out.mkv"
    streamconv.Pipeline(source, ["box"], output, backend="cpu",
                        sink_options={"codec": "ffv1", "pix_fmt": "bgr0"}).run()
    assert output_pts(output) == [s / 1000 for s in stamps]
    with av.open(str(output)) as container:
        for image, frame in zip(images, container.decode(video=0), strict=True):
            np.testing.assert_array_equal(frame.to_ndarray(format="rgb24"),
                                          reference_chain(image, parse_chain(["box"]),
                                                          "reflect101"))


def test_duplicate_and_backward_timestamps_are_moved_after_the_previous_frame(cli, tmp_path, rng):
    duplicates = tmp_path / "duplicates.mkv"
    write_intra_mkv(duplicates, [0, 40, 40, 40, 80], rng)
    result = cli("run", str(duplicates), "-o", str(tmp_path / "out1.mkv"), "--backend", "cpu", "-q")
    assert_ok(result)
    assert "2 frame(s) had a timestamp not after the one before" in result.stderr
    assert output_pts(tmp_path / "out1.mkv") == [0, 0.04, 0.041, 0.042, 0.08]
    backwards = tmp_path / "backwards.ts"  # two segments end to end, both starting at pts 0
    backwards.write_bytes(encode_ts(64, 48, 4, 0, rng) + encode_ts(64, 48, 4, 0, rng))
    result = cli("run", str(backwards), "-o", str(tmp_path / "out2.mp4"), "--backend", "cpu", "-q")
    assert result.returncode in (0, 13), result.stderr  # the join may be reported as damage
    assert "4 frame(s) had a timestamp not after the one before" in result.stderr
    times = output_pts(tmp_path / "out2.mp4")
    assert len(times) == 8 and times == sorted(set(times))


def test_an_input_without_timestamps_is_written_at_its_frame_rate(cli, tmp_path):
    # an elementary stream: no timestamps at all
    source = write_moving_clip(tmp_path / "raw.h264", frames=6)
    with av.open(str(source)) as container:
        assert [frame.pts for frame in container.decode(video=0)] == [None] * 6
    output = tmp_path / "out.mp4"
    assert_ok(cli("run", str(source), "-o", str(output), "--backend", "cpu", "-q"))
    # not 1/1200000 s apart
    assert output_pts(output) == pytest.approx([index / 25 for index in range(6)])


@pytest.mark.parametrize("suffix, kept", [("mp4", True), ("mkv", True), ("ts", False)])
@pytest.mark.parametrize("hflip", [False, True], ids=["rotated", "rotated-mirrored"])
def test_display_rotation_is_passed_on_and_frames_stay_as_stored(tmp_path, rng, suffix, kept,
                                                                 hflip):
    from fractions import Fraction

    source = tmp_path / "rotated.mp4"
    images = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(3)]
    with av.open(str(source), "w") as container:
        stream = container.add_stream("ffv1", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "bgr0"
        stream.set_display_rotation(90, hflip=hflip)
        for index, image in enumerate(images):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="bgr0")
            frame.pts, frame.time_base = index, Fraction(1, 30)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with av.open(str(source)) as container:
        wanted = next(container.decode(video=0))
        wanted_rotation, wanted_matrix = wanted.rotation, display_matrix(wanted)
    assert wanted_rotation == 90 and wanted_matrix is not None
    output = tmp_path / f"out.{suffix}"
    codec = {"codec": "ffv1", "pix_fmt": "bgr0"} if suffix != "ts" else {}
    streamconv.Pipeline(source, ["box"], output, backend="cpu", sink_options=codec).run()
    with av.open(str(output)) as container:
        first = next(container.decode(video=0))
        assert (first.width, first.height) == (64, 48)  # not rotated: as stored
        if suffix != "ts":
            np.testing.assert_array_equal(first.to_ndarray(format="rgb24"),
                                          reference_chain(images[0], parse_chain(["box"]),
                                                          "reflect101"))
        assert (display_matrix(first) == wanted_matrix) == kept


def display_matrix(frame: av.VideoFrame):
    from av.sidedata.sidedata import Type

    data = frame.side_data.get(Type.DISPLAYMATRIX)
    return None if data is None else bytes(data)[:36]


def test_video_stream_picks_among_several_and_other_streams_are_copied(cli, tmp_path, rng):
    from fractions import Fraction

    source = tmp_path / "many.mkv"
    with av.open(str(source), "w") as container:
        small = container.add_stream("ffv1", rate=30)
        small.width, small.height, small.pix_fmt = 32, 24, "bgr0"
        large = container.add_stream("ffv1", rate=30)
        large.width, large.height, large.pix_fmt = 64, 48, "bgr0"
        audio = container.add_stream("pcm_s16le", rate=8000)
        audio.layout = "mono"
        subtitle = container.add_stream("ass")
        for index in range(3):
            for stream in (small, large):
                image = rng.integers(0, 256, (stream.height, stream.width, 3), np.uint8)
                frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="bgr0")
                frame.pts, frame.time_base = index, Fraction(1, 30)
                for packet in stream.encode(frame):
                    container.mux(packet)
            tone = av.AudioFrame.from_ndarray(np.zeros((1, 266), np.int16), format="s16",
                                              layout="mono")
            tone.sample_rate, tone.pts = 8000, index * 266
            for packet in audio.encode(tone):
                container.mux(packet)
        for stream in (small, large, audio):
            for packet in stream.encode(None):
                container.mux(packet)
        del subtitle  # an empty subtitle track: present, no packets
    result = cli("run", str(source), "-o", str(tmp_path / "out.mkv"), "--video-stream", "1",
                 "--backend", "cpu", "-q")
    assert_ok(result)
    with av.open(str(tmp_path / "out.mkv")) as container:
        video = container.streams.video
        assert len(video) == 1 and \
            (video[0].codec_context.width, video[0].codec_context.height) == (64, 48)
        assert len(container.streams.audio) == 1
    assert_error(cli("run", str(source), "--video-stream", "2", "--backend", "cpu"), 4,
                 "video stream 2 requested, input has 2")


@pytest.mark.parametrize("pix_fmt, width, height", [("yuv444p", 65, 49), ("yuv420p10le", 64, 48),
                                                    ("gray", 33, 17), ("yuv422p", 30, 20)])
def test_other_pixel_formats_and_odd_sizes_travel_as_rgb_and_are_filtered_exactly(
        tmp_path, rng, pix_fmt,
                                                                                   width, height):
    from fractions import Fraction

    source = tmp_path / "input.mkv"
    with av.open(str(source), "w") as container:
        stream = container.add_stream("ffv1", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        for index in range(3):
            image = rng.integers(0, 256, (height, width, 3), np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format=pix_fmt)
            frame.pts, frame.time_base = index, Fraction(1, 30)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    # 8-bit frames here (10-bit video is filtered in 16 bits by default:
    # tests/backends/test_depth16.py).
    with streamconv.FileSource(source, depth=8) as video:
        assert video.planes is None  # only 8-bit yuv420p travels as planes; the rest as RGB
        frames = list(video)
    output = tmp_path / "out.mkv"
    pipeline = streamconv.Pipeline(streamconv.FileSource(source, depth=8), ["sharpen"], output,
                                   backend="cpu",
                                   colour="backend",
                                   sink_options={"codec": "ffv1", "pix_fmt": "bgr0"})
    assert pipeline.run().frames == 3
    with av.open(str(output)) as container:
        written = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    chain = parse_chain(["sharpen"])
    assert [w.shape for w in written] == [(height, width, 3)] * 3
    for got, frame in zip(written, frames, strict=True):
        np.testing.assert_array_equal(got, reference_chain(frame, chain, "reflect101"))


def test_host_memory_stays_steady_over_five_runs_of_500_frames():
    resident = []
    for _ in range(5):
        stats = streamconv.Pipeline("test:160x120,frames=500", ["box"], backend="cpu").run()
        assert stats.frames == 500
        resident.append(resident_bytes())
    assert resident[-1] - resident[1] <= 16 << 20, resident


def test_the_docs_table_names_only_tests_that_exist():
    import re

    table = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    named = set(re.findall(r"(test_[a-z0-9_]+)(\*)?", table))
    assert len(named) > 20
    sources = "\n".join(path.read_text(encoding="utf-8")
                        for path in (REPO / "tests").rglob("test_*.py"))
    defined = set(re.findall(r"^def (test_\w+)", sources, re.MULTILINE))
    modules = {path.stem for path in (REPO / "tests").rglob("test_*.py")}
    for name, star in named:
        found = name in modules or \
            (any(d.startswith(name) for d in defined) if star else name in defined)
        assert found, f"docs/reliability.md names {name}{star}, which is not a test"


def test_overlapping_sources_each_count_their_own_damage_and_leave_pyav_logging_as_it_was(
        tmp_path, clips):
    import av.logging

    damaged = tmp_path / "damaged.ts"
    damaged.write_bytes(clips["ts"][: len(clips["ts"]) // 2])
    # another demuxer: FFmpeg's lines name the component, not the file
    intact = tmp_path / "intact.mkv"
    intact.write_bytes(clips["mkv"])
    assert av.logging.get_level() is None
    first = streamconv.FileSource(intact)
    second = streamconv.FileSource(damaged)
    first.close()  # the first watch ends while the second still reads
    assert av.logging.get_level() is not None
    list(second)
    second.close()
    assert second.damage() and not first.damage()
    assert av.logging.get_level() is None and av.logging.get_skip_repeated()
