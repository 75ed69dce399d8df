"""Choosing the decoder and the encoder's rate, without a GPU: --decoder's usage rules, the CPU
decoder named in the stats, NVDEC refused with the extra to install, NVENC refused with the
reason, --bitrate reaching the encoder, and the sequence-parameter-set scan NVDEC's change
detection relies on (on real libx264 output)."""

from __future__ import annotations

import importlib.util
import json

import av
import numpy as np
import pytest

from streamconv.io.ffmpeg.encoder_check import hardware_encoders
from streamconv.io.sources.nvdec.source import codec_name, sequence_parameter_sets
from streamconv.io.sources.nvdec.caps import NvdecUnsupported, check_stream

from helpers.cli import assert_error, assert_ok
from helpers.clips import write_clip

HAVE_NVDEC = importlib.util.find_spec("PyNvVideoCodec") is not None


def test_decoder_is_in_the_help(cli):
    result = cli("run", "--help")
    assert_ok(result)
    assert "--decoder {auto,cpu,nvdec}" in result.stdout and "--bitrate RATE" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["test:64x48", "--decoder", "nvdec"], "--decoder nvdec applies to video files and streams"),
    (["SAMPLE", "--decoder", "nvdec", "--hwaccel", "cuda"], "choose one"),
    (["SAMPLE", "--decoder", "gpu"], "invalid choice: 'gpu'"),
    (["SAMPLE", "--bitrate", "fast"], "expected bits per second"),
    (["SAMPLE", "--bitrate", "0"], "expected bits per second"),
    # Arabic-Indic digits: not FFmpeg's
    (["SAMPLE", "--bitrate", "\u0661\u0662k"], "expected bits per second"),
])
def test_usage_errors_exit_2(cli, sample_clip, args, message):
    result = cli("run", *[str(sample_clip) if a == "SAMPLE" else a for a in args])
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr


@pytest.mark.skipif(HAVE_NVDEC, reason="PyNvVideoCodec is installed here")
def test_nvdec_without_its_extra_is_exit_7_naming_it(cli, sample_clip, tmp_path):
    out = tmp_path / "out.mkv"
    result = cli("run", str(sample_clip), "-o", str(out), "--decoder", "nvdec", "--backend", "cpu")
    assert_error(result, 7)
    assert "pip install 'streamconv[nvdec]'" in result.stderr and not out.exists()


def test_the_cpu_decoder_is_named_in_the_stats(cli, sample_clip, tmp_path):
    stats = tmp_path / "stats.json"
    result = cli("run", str(sample_clip), "--backend", "cpu", "--max-frames", "5", "--stats-json",
                 str(stats), "--no-progress")
    assert_ok(result)
    assert json.loads(stats.read_text())["decoder"] == "cpu (h264)"
    assert "decoded by cpu (h264)]" in result.stderr


def test_info_lists_decoders_and_nvenc_encoders(cli):
    result = cli("info")
    assert_ok(result)
    assert "decoders:" in result.stdout and "  nvdec: " in result.stdout
    assert "encoders (NVENC):" in result.stdout


def test_a_lower_bitrate_makes_a_smaller_file(cli, sample_clip, tmp_path):
    sizes = {}
    for rate in ("100k", "2M"):
        out = tmp_path / f"{rate}.mp4"
        assert_ok(cli("run", str(sample_clip), "-o", str(out), "--backend", "cpu", "--bitrate",
                      rate, "--no-progress", "-q"))
        sizes[rate] = out.stat().st_size
        with av.open(str(out)) as container:
            assert sum(1 for _ in container.decode(video=0)) == 120
    # 4 s of video: 100 kb/s is ~50 kB, 2 Mb/s up to ~1 MB (the sample needs less than that).
    assert sizes["100k"] < 90_000 < sizes["2M"], sizes


def test_nvenc_where_it_cannot_open_is_exit_6_saying_why(cli, tmp_path):
    reasons = hardware_encoders()
    if "h264_nvenc" not in reasons:
        pytest.skip("this FFmpeg build has no h264_nvenc")
    if reasons["h264_nvenc"] is None:
        pytest.skip("NVENC works here (tested in test_cuda_nvdec)")
    out = tmp_path / "out.mp4"
    result = cli("run", "test:320x240,frames=3", "-o", str(out), "--backend", "cpu", "--codec",
                 "h264_nvenc", "--crf", "23")
    assert_error(result, 6)
    assert "NVENC" in result.stderr and "libx264 works everywhere" in result.stderr and \
        not out.exists()


def annex_b_keyframes(path) -> list[bytes]:
    with av.open(str(path)) as container:
        return [bytes(p) for p in container.demux(video=0) if p.size and p.is_keyframe]


def write_ts(path, width: int, height: int, frames: int = 20) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": "5"}
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), 8 * index, np.uint8),
                                               format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_sequence_parameter_sets_are_found_in_every_keyframe_and_differ_with_the_size(tmp_path):
    write_ts(tmp_path / "a.ts", 320, 240)
    write_ts(tmp_path / "b.ts", 416, 256)
    first = {sequence_parameter_sets(k, "h264") for k in annex_b_keyframes(tmp_path / "a.ts")}
    second = {sequence_parameter_sets(k, "h264") for k in annex_b_keyframes(tmp_path / "b.ts")}
    assert len(first) == len(second) == 1 and b"" not in first
    assert first != second
    assert next(iter(first))[0] & 0x1F == 7  # an SPS NAL header
    assert sequence_parameter_sets(b"\x00\x00\x01\x65\x88\x84\x00", "h264") == b""  # a slice alone


@pytest.mark.parametrize("size, interlaced, reason",
                         [((353, 241), False, "even size"), ((352, 241), False, "even size"),
                                                      ((720, 576), True, "interlaced")])
def test_nvdec_refuses_odd_sizes_and_interlaced_pictures_before_asking_the_gpu(size, interlaced,
                                                                               reason):
    """Neither can give libavcodec's frames through NVDEC (the planes need an even size; NVDEC
    deinterlaces): refused from the stream's description alone, GPU or not."""
    with pytest.raises(NvdecUnsupported, match=reason):
        check_stream(0, "vp9", "yuv420p", *size, interlaced=interlaced)


def test_nvdec_is_asked_about_the_codec_not_the_decoder_libavcodec_picked(tmp_path):
    """An AV1 stream, which libavcodec decodes with libdav1d: NVDEC's checks and its decoder get
    ``av1`` (under libavcodec's decoder name every AV1 stream was refused as not NVDEC's)."""
    clip = write_clip(tmp_path / "clip.mkv", "libsvtav1", "yuv420p", frames=2, size=(64, 48),
                      options={"preset": "12"})
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        assert codec_name(stream) == "av1", stream.codec_context.name
