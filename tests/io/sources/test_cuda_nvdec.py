"""NVDEC through PyNvVideoCodec (--decoder nvdec): frames decoded into the slots' device planes
give the same output as libavcodec's, frame for frame; damage is counted; what NVDEC cannot
take is an error (nvdec) or goes to the CPU (auto); device memory does not grow."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import av
import numpy as np
import pytest

import streamconv
from streamconv.io.sources.file import FileSource
from streamconv.io.sinks.sink import Sink

from helpers.clips import write_clip
from helpers.damage import DAMAGES, readable_frames

pytestmark = pytest.mark.cuda
nvc = pytest.importorskip("PyNvVideoCodec", reason="PyNvVideoCodec not installed (the nvdec extra)")

from streamconv.io.sources.nvdec.source import NvdecSource  # noqa: E402
from streamconv.io.sources.nvdec.caps import NvdecUnsupported, decoder_caps  # noqa: E402

CHAIN = ["box:size=5", "sharpen"]


class PlanesRecorder(Sink):
    """Keeps a copy of every filtered frame (planes when the pipeline carries them) and its pts."""

    name = "recorder"

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[np.ndarray] = []
        self.pts: list[int | None] = []

    def send(self, frame: np.ndarray, meta) -> None:
        self.frames.append(frame.copy())
        self.pts.append(meta.pts)
        self.frames_written += 1

    def accepts_planes(self, layout) -> bool:
        return True


def filtered_by(clip: Path, decoder: str, chain=CHAIN):
    source = streamconv.open_source(clip, decoder=decoder)
    recorder = PlanesRecorder()
    pipeline = streamconv.Pipeline(source, chain, recorder, backend="cuda")
    in_place = pipeline.device_input
    stats = pipeline.run()
    return recorder, stats, in_place


def needs(codec: str, bits: int) -> None:
    if not decoder_caps(0, codec, bits).supported:
        pytest.skip(f"this GPU's NVDEC has no {codec} {bits}-bit")


CASES = [("libx264", "yuv420p", "h264", 8, {"preset": "veryfast", "bf": "3"}),
         ("libx265", "yuv420p", "hevc", 8,
          {"preset": "veryfast", "x265-params": "log-level=error"}),
         ("libx265", "yuv420p10le", "hevc", 10,
          {"preset": "veryfast", "x265-params": "log-level=error"}),
         ("libx265", "yuv420p12le", "hevc", 12,
          {"preset": "veryfast", "x265-params": "log-level=error"}),
         ("libvpx-vp9", "yuv420p", "vp9", 8, {"deadline": "realtime", "cpu-used": "8"}),
         ("libsvtav1", "yuv420p", "av1", 8, {"preset": "12"})]


@pytest.mark.parametrize("encoder, pix_fmt, codec, bits, options", CASES,
                         ids=[f"{c}-{p}" for c, p, *_ in CASES])
def test_nvdec_into_the_slots_equals_the_cpu_decoder_frame_for_frame(tmp_path, encoder, pix_fmt,
                                                                     codec, bits,
                                                                       options):
    needs(codec, bits)
    suffix = "webm" if codec == "vp9" else "mkv" if codec == "av1" else "mp4"
    clip = write_clip(tmp_path / f"clip.{suffix}", encoder, pix_fmt, frames=40, size=(352, 240),
                      options=options)
    got, stats, in_place = filtered_by(clip, "nvdec")
    expected, cpu_stats, _ = filtered_by(clip, "cpu")
    assert in_place and stats.decoder.startswith("nvdec") and cpu_stats.decoder.startswith("cpu")
    assert "upload" not in stats.summary() and "upload" in cpu_stats.summary()  # nothing went up
    assert stats.damage == [] and stats.decode_errors == 0
    assert len(got.frames) == len(expected.frames) == 40
    assert got.pts == expected.pts
    for index, (frame, reference) in enumerate(zip(got.frames, expected.frames)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")


def test_the_cli_writes_the_same_file_with_nvdec_as_with_the_cpu_decoder(cli, tmp_path):
    clip = write_clip(tmp_path / "in.mp4", "libx264", "yuv420p", frames=40, size=(352, 240),
                      options={"preset": "veryfast"})
    outputs = {}
    for decoder in ("nvdec", "cpu"):
        out, stats = tmp_path / f"{decoder}.mkv", tmp_path / f"{decoder}.json"
        result = cli("run", str(clip), "-o", str(out), "--filter", "edge", "--backend", "cuda",
                     "--decoder", decoder, "--stats-json", str(stats), "--no-progress", "-q")
        assert result.returncode == 0, result.stderr
        assert json.loads(stats.read_text())["decoder"].startswith(decoder)
        with av.open(str(out)) as container:
            outputs[decoder] = [f.to_ndarray() for f in container.decode(video=0)]
    assert len(outputs["nvdec"]) == len(outputs["cpu"]) == 40
    for a, b in zip(outputs["nvdec"], outputs["cpu"]):
        np.testing.assert_array_equal(a, b)


def test_segments_on_nvdec_equal_a_one_piece_nvdec_run(cli, tmp_path):
    """run --segments 3 --decoder nvdec: each segment on its own NVDEC session after a seek; the
    joined output holds the one-piece run's frames and pts (B-frames, so display order counts)."""
    clip = write_clip(tmp_path / "in.mp4", "libx264", "yuv420p", frames=90, size=(352, 240),
                      options={"preset": "veryfast", "g": "15", "bf": "2"})
    outputs = {}
    for name, extra in (("whole", ()), ("segments", ("--segments", "3"))):
        out, stats = tmp_path / f"{name}.mkv", tmp_path / f"{name}.json"
        result = cli("run", str(clip), "-o", str(out), "--filter", "edge", "--backend", "cuda",
                     "--decoder", "nvdec",
                     "--codec", "ffv1", "--stats-json", str(stats), "--no-progress", "-q", *extra)
        assert result.returncode == 0, result.stderr
        assert json.loads(stats.read_text())["frames"] == 90
        with av.open(str(out)) as container:
            outputs[name] = [(f.pts, f.to_ndarray()) for f in container.decode(video=0)]
    assert [pts for pts, _ in outputs["segments"]] == [pts for pts, _ in outputs["whole"]]
    for (_, a), (_, b) in zip(outputs["segments"], outputs["whole"]):
        np.testing.assert_array_equal(a, b)


def test_frames_delivered_to_host_memory_equal_the_cpu_decoders(tmp_path):
    clip = write_clip(tmp_path / "in.mp4", "libx264", "yuv420p", frames=12, size=(352, 240),
                      options={"preset": "veryfast"})
    with NvdecSource(clip) as hardware, FileSource(clip) as software:
        assert hardware.decoder.startswith("nvdec") and hardware.planes == software.planes
        for index in range(12):
            shape = (hardware.shape, hardware.planes.shape)[index % 2]  # RGB and planes in turn
            got = np.full(shape, 0xA5, np.uint8)
            expected = np.full(shape, 0x5A, np.uint8)
            assert hardware.read_into(got) is not None and software.read_into(expected) is not None
            np.testing.assert_array_equal(got, expected, err_msg=f"frame {index}")
        assert hardware.read_into(np.empty(hardware.shape, np.uint8)) is None


def test_a_size_change_drains_and_remakes_the_decoder(tmp_path):
    first = write_clip(tmp_path / "a.ts", "libx264", "yuv420p", frames=20, size=(320, 240),
                       options={"preset": "veryfast"})
    second = write_clip(tmp_path / "b.ts", "libx264", "yuv420p", frames=20, size=(416, 256),
                        options={"preset": "veryfast"}, seed=9)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    got, stats, _ = filtered_by(joined, "nvdec")
    expected, cpu_stats, _ = filtered_by(joined, "cpu")
    assert stats.resizes == cpu_stats.resizes == 1
    assert [f.shape for f in got.frames] == [f.shape for f in expected.frames]
    assert len(got.frames) == 40
    for index, (frame, reference) in enumerate(zip(got.frames, expected.frames)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")


def test_a_change_nvdec_cannot_take_goes_to_the_cpu_under_auto_and_fails_under_nvdec(cli, tmp_path):
    if decoder_caps(0, "h264", 10).supported:
        pytest.skip("this GPU's NVDEC decodes 10-bit H.264: no refused change to make")
    first = write_clip(tmp_path / "a.ts", "libx264", "yuv420p", frames=20, size=(352, 240),
                       options={"preset": "veryfast"})
    second = write_clip(tmp_path / "b.ts", "libx264", "yuv420p10le", frames=20, size=(352, 240),
                        options={"preset": "veryfast"},
                        seed=9)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    got, stats, in_place = filtered_by(joined, "auto")
    expected, _, _ = filtered_by(joined, "cpu")
    assert in_place and stats.decoder == "nvdec (h264, device 0, cpu from frame 20)"
    assert len(got.frames) == len(expected.frames) == 40
    for index, (frame, reference) in enumerate(zip(got.frames, expected.frames)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")
    out = tmp_path / "out.mkv"
    refused = cli("run", str(joined), "-o", str(out), "--backend", "cuda", "--decoder", "nvdec",
                  "--no-progress")
    assert refused.returncode == 8, refused.stderr
    assert "NVDEC cannot decode" in refused.stderr and "h264 10-bit" in refused.stderr
    with av.open(str(out)) as container:  # the frames before the change are kept
        assert sum(1 for _ in container.decode(video=0)) == 20


@pytest.mark.parametrize("damage", ["flipped 4x300", "zeroed 2000 at 40%", "cut 60%"])
@pytest.mark.parametrize("name", ["mp4", "mkv", "ts"])
def test_damage_under_nvdec_exits_13_with_the_rest_written(cli, tmp_path, corpus, name,
                                                           damage):  # noqa: F811
    source = tmp_path / f"damaged.{name}"
    source.write_bytes(DAMAGES[damage](corpus[name]))
    output = tmp_path / "out.mkv"
    result = cli("run", str(source), "-o", str(output), "--backend", "cuda", "--decoder", "nvdec",
                 "--no-progress", "-q")
    if readable_frames(source) == 0:
        assert result.returncode == 4 and not output.exists(), result.stderr
        return
    assert result.returncode == 13, result.stderr
    assert "input damaged:" in result.stderr and "Traceback" not in result.stderr
    assert "Decode Error occurred" not in result.stdout  # counted, not printed
    with av.open(str(output)) as container:
        assert sum(1 for _ in container.decode(video=0)) > 0


def test_a_stream_nvdec_cannot_take_is_exit_7_or_the_cpu_under_auto(cli, tmp_path):
    clip = write_clip(tmp_path / "444.mp4", "libx264", "yuv444p", frames=5, size=(352, 240),
                      options={"preset": "ultrafast"})
    out = tmp_path / "out.mkv"
    refused = cli("run", str(clip), "-o", str(out), "--backend", "cuda", "--decoder", "nvdec",
                  "--no-progress")
    assert refused.returncode == 7, refused.stderr
    assert "yuv444p" in refused.stderr and not out.exists()
    stats = tmp_path / "stats.json"
    taken = cli("run", str(clip), "-o", str(out), "--backend", "cuda", "--stats-json", str(stats),
                "--no-progress")
    assert taken.returncode == 0, taken.stderr
    assert "decoding on the CPU" in taken.stderr and "yuv444p" in taken.stderr
    assert json.loads(stats.read_text())["decoder"] == "cpu (h264)"


REFUSED = [("libvpx-vp9", "yuv420p", (353, 241), "webm", {"deadline": "realtime", "cpu-used": "8"},
            "even size"),
           ("libx264", "yuv420p", (352, 288), "ts", {"preset": "veryfast", "flags": "+ildct+ilme"},
            "interlaced"),
           ("mpeg2video", "yuv420p", (352, 288), "ts", {"flags": "+ildct+ilme", "top": "1"},
            "interlaced"),
           ("libx264", "gray", (352, 240), "mp4", {"preset": "ultrafast"},
            "NVDEC refused the stream")]


@pytest.mark.parametrize("encoder, pix_fmt, size, suffix, options, reason", REFUSED,
                         ids=["odd-vp9", "interlaced-h264", "interlaced-mpeg2", "gray-h264"])
def test_streams_nvdec_would_not_decode_as_libavcodec_are_refused_or_go_to_the_cpu(
        tmp_path, encoder, pix_fmt,
                                                                                  size, suffix,
        options, reason):
    """An odd size (the planes need an even one), interlaced pictures (NVDEC deinterlaces them,
    libavcodec weaves), 4:0:0 (NVDEC refuses it at its first sequence header): never NVDEC's
    frames."""
    clip = write_clip(tmp_path / f"clip.{suffix}", encoder, pix_fmt, frames=6, size=size,
                      options=options)
    try:
        hardware = streamconv.open_source(clip, decoder="nvdec")
    except NvdecUnsupported as exc:
        assert reason in str(exc) and "Traceback" not in str(exc)
    # a GPU that decodes 4:0:0 as libavcodec does (odd sizes and interlacing are refused everywhere)
    else:
        hardware.close()
        assert pix_fmt == "gray", f"NVDEC took a stream it must refuse ({reason})"
        got, expected = filtered_by(clip, "nvdec")[0], filtered_by(clip, "cpu")[0]
        assert len(got.frames) == len(expected.frames) == 6 and got.pts == expected.pts
        for frame, reference in zip(got.frames, expected.frames):
            np.testing.assert_array_equal(frame, reference)
        return
    got, stats, _ = filtered_by(clip, "auto")
    expected, _, _ = filtered_by(clip, "cpu")
    assert stats.decoder.startswith("cpu") and len(got.frames) == len(expected.frames) == 6
    for frame, reference in zip(got.frames, expected.frames):
        np.testing.assert_array_equal(frame, reference)


def test_an_mp4_edit_list_gives_the_cpu_decoders_frames_and_pts(tmp_path):
    """A file cut without re-encoding starts at the keyframe before its cut: the edit list flags
    the frames before it as discarded (negative pts); libavcodec drops them, so must NVDEC."""
    whole = write_clip(tmp_path / "whole.mp4", "libx264", "yuv420p", frames=30, size=(352, 240),
                       options={"preset": "veryfast", "bf": "2", "g": "10"})
    clip = tmp_path / "cut.mp4"
    with av.open(str(whole)) as source, av.open(str(clip), "w") as target:
        video = source.streams.video[0]
        stream = target.add_stream_from_template(video)
        lead_in = round(4 / (video.time_base * 25))  # 4 frames before the edit list's start
        for packet in source.demux(video):
            if packet.size:
                packet.pts, packet.dts, packet.stream = packet.pts - lead_in, packet.dts - \
                    lead_in, stream
                target.mux(packet)
    got, stats, in_place = filtered_by(clip, "nvdec")
    expected, _, _ = filtered_by(clip, "cpu")
    assert in_place and stats.damage == []
    assert len(got.frames) == len(expected.frames) == 26 and got.pts == expected.pts
    for index, (frame, reference) in enumerate(zip(got.frames, expected.frames)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")


def test_hevc_cut_inside_an_open_gop_keeps_the_cpu_decoders_pts(tmp_path):
    """A transport stream cut mid-GOP starts at a CRA whose leading (RASL) pictures cannot decode:
    libavcodec drops them, and the first frame keeps the CRA's own pts under NVDEC too."""
    needs("hevc", 8)
    whole = write_clip(tmp_path / "whole.ts", "libx265", "yuv420p", frames=40, size=(352, 240),
                       options={"preset": "ultrafast",
                                "x265-params": "log-level=error:keyint=12:open-gop=1:bframes=3"})
    data = whole.read_bytes()
    clip = tmp_path / "cut.ts"
    clip.write_bytes(data[188 * (len(data) // 188 * 2 // 5):])
    got, _, in_place = filtered_by(clip, "nvdec")
    expected, _, _ = filtered_by(clip, "cpu")
    assert in_place and len(got.frames) == len(expected.frames) > 10
    assert got.pts == expected.pts
    for index, (frame, reference) in enumerate(zip(got.frames, expected.frames)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")


def test_no_device_memory_grows_over_10000_frames(tmp_path):
    from streamconv.gpu.binding import binding

    gpu = binding()
    clip = write_clip(tmp_path / "long.mp4", "libx264", "yuv420p", frames=10_000, size=(128, 96),
                      options={"preset": "ultrafast", "g": "50"})
    context = gpu.device(0).retain_primary_context()
    free_at: dict[int, int] = {}
    try:
        with NvdecSource(clip) as source:
            planes = np.empty(source.planes.shape, source.planes.dtype)
            count = 0
            while source.read_into(planes) is not None:
                count += 1
                if count in (500, 10_000):
                    context.push()
                    free_at[count] = gpu.mem_get_info()[0]
                    context.pop()
        assert count == 10_000
        assert abs(free_at[500] - free_at[10_000]) < 2**20, free_at
        def free_memory() -> int:
            gc.collect()  # modules and buffers of closed backends go when collected
            context.push()
            try:
                return gpu.mem_get_info()[0]
            finally:
                context.pop()

        filtered_by(clip, "nvdec", chain=["box:size=3"])  # compiles and caches what a run needs
        free = [free_memory()]
        for _ in range(4):  # whole runs through the slots' device planes leave nothing behind
            filtered_by(clip, "nvdec", chain=["box:size=3"])
            free.append(free_memory())
        # The driver hands memory out in 2 MiB pages; one NVDEC session alone holds more than 4 MiB.
        assert free[0] - min(free) <= 4 * 2**20, free
    finally:
        context.release()


def test_info_lists_the_nvdec_capabilities(cli):
    result = cli("info")
    assert result.returncode == 0, result.stderr
    assert "nvdec:" in result.stdout and "h264 8-bit" in result.stdout


def test_nvenc_encodes_where_the_gpu_has_one(cli, tmp_path):
    from streamconv.io.ffmpeg.encoder_check import hardware_encoders

    reason = hardware_encoders().get("h264_nvenc", "this FFmpeg build has no h264_nvenc")
    if reason is not None:
        pytest.skip(f"no NVENC here: {reason}")
    clip = write_clip(tmp_path / "in.mp4", "libx264", "yuv420p", frames=20, size=(352, 240),
                      options={"preset": "veryfast"})
    out = tmp_path / "out.mp4"
    result = cli("run", str(clip), "-o", str(out), "--backend", "cuda", "--codec", "h264_nvenc",
                 "--crf", "23", "--bitrate", "4M", "--filter", "edge", "--no-progress", "-q")
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert sum(1 for _ in container.decode(video=0)) == 20
