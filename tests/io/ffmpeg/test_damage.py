"""Damaged input is reported truly, both ways: an intact file exits 0 with no damage warning, a
damaged one that still decodes exits 13 with every decodable frame written and a warning naming
what was lost, one with nothing decodable exits 4 and leaves no output.

The corpus is made here once per module: 2 s clips of 64x48 H.264 with an AAC and an MP2
track (and subtitles where the container holds them) as MP4 (index at the end, and
faststart), Matroska and MPEG-TS; then cut, byte-flipped and zeroed. docs/reliability.md
("Damaged input") has the table of cases.
"""

from __future__ import annotations

import io
import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

import streamconv
from streamconv.frames.slots import FrameMeta

from helpers.cli import assert_error, assert_ok
from helpers.damage import DAMAGES, FRAMES, decodable_frames, flip_bytes, readable_frames

def run(cli, source: Path, output: Path):
    return cli("run", str(source), "-o", str(output), "--backend", "cpu", "--no-progress", "-q")


def damage_warning(result) -> str:
    """The one 'input damaged:' warning of a run that exited 13."""
    assert result.returncode == 13, result.stderr
    assert "Traceback" not in result.stderr and \
        "streamconv: error:" not in result.stderr, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "input damaged:" in line]
    assert len(warnings) == 1, result.stderr
    return warnings[0]


def output_streams(path: Path) -> tuple[int, str]:
    """(video frames, the streams' kinds as letters: "vaa") of an output file."""
    with av.open(str(path)) as container:
        kinds = "".join(stream.type[0] for stream in container.streams)
        return sum(1 for _ in container.decode(video=0)), kinds


# ---------------------------------------------------------------- intact


@pytest.mark.parametrize("name",
                         ["mp4", "faststart.mp4", "mkv", "ts", "late.mkv", "late.mp4", "late.ts"])
def test_intact_input_exits_0_without_a_damage_warning(cli, tmp_path, corpus, name):
    source = tmp_path / f"clip.{name}"
    source.write_bytes(corpus[name])
    result = run(cli, source, tmp_path / "out.mkv")
    assert_ok(result)
    assert "damage" not in result.stderr, result.stderr
    assert output_streams(tmp_path / "out.mkv")[0] == readable_frames(source)


@pytest.mark.parametrize("name, suffix",
                         [("mkv", "mp4"), ("mkv", "mkv"), ("mkv", "ts"), ("late.mkv", "mkv"),
                                          ("late.mkv", "mp4"), ("late.ts", "ts")])
def test_streamconvs_own_outputs_read_back_as_intact(cli, tmp_path, corpus, name, suffix):
    source = tmp_path / f"clip.{name}"
    source.write_bytes(corpus[name])
    first = tmp_path / f"first.{suffix}"
    assert_ok(run(cli, source, first))
    result = run(cli, first, tmp_path / "again.mkv")
    assert_ok(result)
    assert "damage" not in result.stderr, result.stderr


# ---------------------------------------------------------------- damaged


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("name", ["mp4", "faststart.mp4", "mkv", "ts"])
def test_damaged_input_exits_13_with_every_decodable_frame_or_4_with_none(cli, tmp_path, corpus,
                                                                          name, damage):
    source = tmp_path / f"damaged.{name}"
    source.write_bytes(DAMAGES[damage](corpus[name]))
    output = tmp_path / "out.mkv"
    result = run(cli, source, output)
    frames = readable_frames(source)
    if frames == 0:  # as for an MP4 cut before its index (at its end): nothing can be read
        assert_error(result, 4)
        assert not output.exists()
        return
    warning = damage_warning(result)
    assert f"every frame that decoded was processed ({frames})" in warning
    if damage.startswith("cut"):
        assert "(truncated)" in warning  # the file's own structure says so, errors or not
    elif name == "ts":
        assert "transport packet" in warning  # garbage or missing packets, from their headers
    assert output_streams(output)[0] == frames


@pytest.mark.parametrize("name, marker",
                         [("faststart.mp4", b"mdat"), ("mkv", b"\x1f\x43\xb6\x75"), ("ts", None)],
                         ids=["faststart.mp4", "mkv", "ts"])
def test_a_file_cut_before_its_first_frame_exits_4_and_leaves_no_output(cli, tmp_path, corpus, name,
                                                                        marker):
    data = corpus[name]
    # Just past the media data's start (MP4), the first cluster's (Matroska), the first 5 packets
    # (TS).
    end = data.index(marker) + 64 if marker else 5 * 188 + 100
    source = tmp_path / f"headers-only.{name}"
    source.write_bytes(data[:end])
    assert_error(run(cli, source, tmp_path / "out.mkv"), 4, "no frame could be decoded",
                 "(truncated)")
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]


def mp4_tracks(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each 'trak' box (a stream's description) in the 'moov' box (the index)."""
    moov = data.rindex(b"moov") - 4
    tracks, position = [], moov + 8
    while position < moov + struct.unpack(">I", data[moov:moov + 4])[0]:
        size, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind == b"trak":
            tracks.append((position, size))
        position += size
    return tracks


def test_an_mp4_whose_index_is_cut_keeps_the_streams_it_still_describes_and_exits_13(
        cli, tmp_path, corpus):
    data = corpus["mp4"]
    tracks = mp4_tracks(data)
    assert len(tracks) == 4  # video, AAC, MP2, subtitles
    start, size = tracks[-1]
    source = tmp_path / "cut-index.mp4"
    source.write_bytes(data[: start + size // 10])  # inside the subtitles' description
    output = tmp_path / "out.mkv"
    warning = damage_warning(run(cli, source, output))
    assert "cut short inside its index ('moov' box)" in warning
    # the video and both audio tracks: all described
    assert output_streams(output) == (FRAMES, "vaa")


def test_a_matroska_cluster_unreadable_at_opening_is_damage(cli, tmp_path, corpus):
    """The first cluster's size zeroed: FFmpeg says so while the input is probed, before its
    watch starts, and reads on from a later cluster: frames are lost, so it is exit 13."""
    data = bytearray(corpus["mkv"])
    cluster = data.find(b"\x1f\x43\xb6\x75")  # the first Cluster element's ID
    data[cluster + 4] = 0  # its size: no valid first byte of an EBML number
    source, output = tmp_path / "bad.mkv", tmp_path / "out.mkv"
    source.write_bytes(bytes(data))
    warning = damage_warning(run(cli, source, output))
    assert "FFmpeg reported damage" in warning
    assert 0 < decodable_frames(output) < FRAMES


def test_an_mp4_whose_index_is_cut_inside_the_video_description_exits_4(cli, tmp_path, corpus):
    data = corpus["mp4"]
    tracks = mp4_tracks(data)
    start, size = tracks[0]
    source = tmp_path / "cut-index.mp4"
    source.write_bytes(data[: start + size // 10])
    assert_error(run(cli, source, tmp_path / "out.mkv"), 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]


def test_a_few_flipped_bytes_may_go_unseen_but_every_decodable_frame_is_written(
        cli, tmp_path, corpus):
    # 2 runs of 3 bytes inside compressed samples can decode without an error or a flag: FFmpeg
    # conceals them silently, so exit 0 is possible here; what must hold is the frames.
    source = tmp_path / "few-flips.mkv"
    source.write_bytes(flip_bytes(corpus["mkv"], 2, 3))
    output = tmp_path / "out.mkv"
    result = run(cli, source, output)
    assert result.returncode in (0, 13) and "Traceback" not in result.stderr, result.stderr
    assert output_streams(output)[0] == readable_frames(source)


def test_a_ts_cut_between_two_packets_may_go_unseen_but_every_decodable_frame_is_written(
        cli, tmp_path, corpus):
    # Whole packets leave the file's structure intact, and a video PES has no declared length:
    # only a cut audio PES ("PES packet size mismatch") or a decoder error can show it.
    data = corpus["ts"]
    source = tmp_path / "cut-between-packets.ts"
    source.write_bytes(data[: len(data) // 2 // 188 * 188])
    output = tmp_path / "out.mkv"
    result = run(cli, source, output)
    assert result.returncode in (0, 13) and "Traceback" not in result.stderr, result.stderr
    assert 0 < output_streams(output)[0] == readable_frames(source) < FRAMES


def test_m2ts_192_byte_packets_cut_inside_a_packet_are_truncated_and_whole_ones_are_not(
        tmp_path, corpus):
    data = corpus["m2ts"]
    assert len(data) % 192 == 0 and data[4] == 0x47  # a 4-byte time before each packet
    for name, bytes_, damaged in [("intact.m2ts", data, False),
                                  ("cut.m2ts", data[: len(data) // 2 + 100], True)]:
        path = tmp_path / name
        path.write_bytes(bytes_)
        # decoded before the source opens: its log is the source's alone
        expected = readable_frames(path)
        with streamconv.FileSource(path) as source:
            assert sum(1 for _ in source) == expected
            found = source.damage()
        if not damaged:
            assert found == [], found
            continue
        assert found[0] == "the file is cut short: its last 192-byte transport packet has 100 bytes (truncated)"
        # Whether the decoder also logs the cut frame depends on its threads' timing.
        assert all(phrase.startswith("FFmpeg reported damage") for phrase in found[1:]), found


# ---------------------------------------------------------------- a damaged secondary stream


def ts_packets(data: bytes, pid: int) -> list[int]:
    """Offsets of the 188-byte transport packets of ``pid``."""
    return [offset for offset in range(0, len(data) - 187, 188)
            if (data[offset + 1] & 0x1F) << 8 | data[offset + 2] == pid]


def audio_without_parameters(data: bytes, fault: str) -> bytes:
    """The TS with its AAC stream's parameters made unfindable, for real: its packets removed
    (lost in transmission), or every ADTS header's sampling rate index set to 15 (invalid)."""
    with av.open(io.BytesIO(data)) as container:
        pid = container.streams.audio[0].id
    offsets = ts_packets(data, pid)
    if fault == "packets lost":
        lost = set(offsets)
        return b"".join(data[o:o + 188] for o in range(0, len(data), 188) if o not in lost)
    damaged = bytearray(data)
    for offset in offsets:
        for at in range(offset + 4, offset + 186):
            if damaged[at] == 0xFF and damaged[at + 1] & 0xF6 == 0xF0:  # an ADTS sync word
                damaged[at + 2] |= 0x3C
    return bytes(damaged)


@pytest.mark.parametrize("fault, reason", [("packets lost", "it had no packets"),
                                           ("ADTS headers damaged",
                                            "its sample rate could not be found")])
def test_an_audio_stream_without_parameters_is_left_out_and_the_video_written_with_exit_13(
        cli, tmp_path, corpus,
                                                                                           fault,
        reason):
    source = tmp_path / "audio-fault.ts"
    source.write_bytes(audio_without_parameters(corpus["ts"], fault))
    with av.open(str(source)) as container:
        assert container.streams.audio[0].codec_context.sample_rate == 0  # the fault is real
    output = tmp_path / "out.mp4"  # MP4 and Matroska muxers refuse a header with such a stream
    warning = damage_warning(run(cli, source, output))
    assert f"audio stream 1 was left out: {reason}" in warning
    assert output_streams(output) == (FRAMES, "va")  # the video and the MP2 track


def test_a_file_sink_leaves_out_a_copied_stream_without_a_sample_rate(tmp_path, corpus):
    source = tmp_path / "audio-fault.ts"
    source.write_bytes(audio_without_parameters(corpus["ts"], "ADTS headers damaged"))
    output = tmp_path / "out.mkv"
    with av.open(str(source)) as container:
        broken = container.streams.audio[0]
        sink = streamconv.FileSink(output, width=64, height=48, frame_rate=Fraction(24),
                                   copy_streams=[broken])
        for index in range(3):
            sink.send(np.zeros((48, 64, 3), np.uint8), FrameMeta(index, index, Fraction(1, 24)))
        sink.close()
    assert output_streams(output) == (3, "v")
