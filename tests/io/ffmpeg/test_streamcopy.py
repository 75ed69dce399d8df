"""The input's audio is copied to the output packet for packet; --no-audio leaves it out."""

from __future__ import annotations

import io

import av
import pytest

import streamconv

from helpers.streamcopy import FPS, SAMPLE_RATE, SAMPLES, audio_packets, make_clip

def video_frame_count(path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.fixture
def clip(tmp_path):
    path = tmp_path / "with_audio.mp4"
    make_clip(path)
    return path


def test_audio_is_copied_packet_for_packet(cli, clip, tmp_path):
    out = tmp_path / "out.mp4"
    result = cli("run", str(clip), "-o", str(out), "--filter", "box:size=3", "--no-progress", "-q")
    assert result.returncode == 0, result.stderr
    source = audio_packets(clip)
    assert len(source) >= 28 and audio_packets(out) == source
    assert video_frame_count(out) == 30


def test_no_audio_leaves_it_out(cli, clip, tmp_path):
    out = tmp_path / "silent.mp4"
    result = cli("run", str(clip), "-o", str(out), "--no-audio", "-q")
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as container:
        assert [s.type for s in container.streams] == ["video"]


def test_a_stream_the_container_cannot_hold_is_left_out_with_a_warning(cli, clip, tmp_path):
    out = tmp_path / "out.webm"
    result = cli("run", str(clip), "-o", str(out), "--codec", "libvpx-vp9", "--pix-fmt", "yuv420p",
                 "-q")
    assert result.returncode == 0, result.stderr
    assert "audio stream 1 (aac) cannot be stored in .webm; not copied" in result.stderr
    assert audio_packets(out) == [] and video_frame_count(out) == 30


@pytest.mark.parametrize("audio_codec, suffix",
                         [("flac", "mov"), ("pcm_s16le", "mp4"), ("flac", "ts"),
                                                ("pcm_s16le", "ts")])
def test_audio_a_muxer_refuses_only_when_writing_is_left_out_and_the_video_kept(
        cli, tmp_path, audio_codec, suffix):
    """Codecs a muxer lists but refuses: MOV takes FLAC (and Opus) only as MP4, at the first
    packet; MP4 refuses PCM of an unnamed channel layout (Matroska names none) at the trailer.
    Either lost the whole output (exit 8). MPEG-TS takes them as private data nobody decodes."""
    source, out = tmp_path / "in.mkv", tmp_path / f"out.{suffix}"
    make_clip(source, frames=10, audio_codec=audio_codec, sample_format="s16")
    result = cli("run", str(source), "-o", str(out), "--backend", "cpu", "-q")
    assert result.returncode == 0, result.stderr
    assert f"audio stream 1 ({audio_codec}) cannot be stored in .{suffix}; not copied" in result.stderr
    assert video_frame_count(out) == 10 and audio_packets(out) == []


def test_max_frames_keeps_the_audio_up_to_the_last_frame(cli, clip, tmp_path):
    out = tmp_path / "short.mp4"
    result = cli("run", str(clip), "-o", str(out), "--max-frames", "10", "-q")
    assert result.returncode == 0, result.stderr
    copied, source = audio_packets(out), audio_packets(clip)
    assert 0 < len(copied) < len(source) and copied == source[: len(copied)]
    assert copied[-1][0] <= 10 / FPS + 2 * SAMPLES / SAMPLE_RATE  # nothing far past the last frame


def first_video_time(path) -> float:
    with av.open(str(path)) as container:
        return float(next(container.decode(video=0)).time)


def test_pipeline_from_python_copies_audio_into_matroska(clip, tmp_path):
    out = tmp_path / "api.mkv"
    stats = streamconv.Pipeline(streamconv.FileSource(clip), ["edge"], str(out),
                                backend="cpu").run()
    assert stats.frames == 30
    copied, source = audio_packets(out), audio_packets(clip)
    assert [data for _, data in copied] == [data for _, data in source]
    # Matroska keeps 1 ms timestamps and shifts every stream so none starts below 0 (the AAC
    # priming packet): spacing and audio/video offset stay within that millisecond.
    shift = copied[0][0] - source[0][0]
    assert all(abs(c - s - shift) <= 0.001 for (c, _), (s, _) in zip(copied, source))
    assert abs(first_video_time(out) - first_video_time(clip) - shift) <= 0.001


def test_aac_is_copied_into_mpeg_ts_whose_muxer_keeps_no_codec_table(cli, clip, tmp_path):
    out = tmp_path / "out.ts"
    result = cli("run", str(clip), "-o", str(out), "--no-progress", "-q")
    assert result.returncode == 0, result.stderr
    assert "cannot be stored" not in result.stderr
    framed = [data for _, data in audio_packets(out)]
    assert all(data[:2] == b"\xff\xf1" for data in framed)  # MPEG-TS carries AAC in ADTS frames
    assert [data[7:] for data in framed] == [data for _, data in audio_packets(clip)]


def test_audio_goes_along_to_a_network_output(cli, clip):
    from helpers.network import UdpReceiver

    receiver = UdpReceiver()
    result = cli("run", str(clip), "-o", receiver.url, "--no-progress", "-q")
    assert result.returncode == 0, result.stderr
    with av.open(io.BytesIO(receiver.received()), format="mpegts") as container:
        assert sorted(s.codec_context.name for s in container.streams) == ["aac", "h264"]
        assert sum(1 for p in container.demux(audio=0) if p.size) >= 28
