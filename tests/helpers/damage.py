"""A corpus of real clips and the damage done to it (cut, flipped, zeroed bytes)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest


def decodable_frames(path: Path) -> int:
    """Frames FFmpeg decodes from ``path``'s first video stream, as the pipeline must: on one
    thread (frame threads lose frames after a failing packet), packets that fail skipped, the
    read ended where the data becomes unreadable, the decoder drained at the end."""
    count = 0
    # Damaged metadata that is not UTF-8: PyAV up to 18 refuses the input unless told otherwise.
    metadata = {"metadata_errors": "replace"} if int(av.__version__.split(".")[0]) < 19 else {}
    with av.open(str(path), **metadata) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except (av.InvalidDataError, av.MemoryError, IndexError):
                break  # unreadable from here (IndexError: PyAV up to 18, streams added mid-input)
            try:
                count += len(stream.codec_context.decode(packet)) if packet.size else 0
            except av.InvalidDataError:
                pass
        try:
            count += len(stream.codec_context.decode(None))
        except (av.EOFError, av.InvalidDataError):
            pass
    return count


def flip_bytes(data: bytes, places: int = 4, length: int = 300) -> bytes:
    """XOR 0xFF over ``places`` runs of ``length`` bytes spread through the middle of the file."""
    damaged = bytearray(data)
    for number in range(places):
        start = len(data) * (number + 2) // (places + 3)
        damaged[start:start + length] = bytes(b ^ 0xFF for b in damaged[start:start + length])
    return bytes(damaged)


TS_PROGRAM_2 = {"mpegts_start_pid": "0x300", "mpegts_pmt_start_pid": "0x1100",
                "mpegts_service_id": "2"}


FRAMES = 48  # 2 s at 24 fps


ASS_HEADER = (b"[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, "
              b"Fontsize\n"
              b"Style: Default,Arial,16\n\n[Events]\nFormat: Layer, Start, End, Style, Name, "
              b"MarginL, "
              b"MarginR, MarginV, Effect, Text\n")


def write_clip(path: Path, *, video_start: float = 0.0, subtitle: str | None = None,
               options: dict | None = None, container_format: str | None = None) -> Path:
    """A 2 s clip: 64x48 H.264 at 24 fps (a keyframe every 12, B-frames) from ``video_start`` s,
    an AAC and an MP2 track from 0 s, and a subtitle a second in the ``subtitle`` codec."""
    with av.open(str(path), "w", format=container_format, options=options or {}) as container:
        video = container.add_stream("libx264", rate=24)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        video.options = {"preset": "veryfast", "g": "12"}
        audio = [container.add_stream(codec, rate=48000) for codec in ("aac", "mp2")]
        for stream in audio:
            stream.layout = "mono"
        text = container.add_stream(subtitle) if subtitle else None
        if text is not None:
            text.codec_context.subtitle_header = ASS_HEADER
        samples = [0, 0]
        ys, xs = np.mgrid[0:48, 0:64]
        for index in range(FRAMES):
            for number, stream in enumerate(audio):
                while samples[number] < (index + 1) * 2000:  # 2000 samples a frame at 48 kHz
                    size = 1024  # the encoder re-chunks to its own frame size
                    tone = 0.2 * np.sin(2 * np.pi * 440 * (np.arange(
                        size) + samples[number]) / 48000)
                    format_ = stream.codec_context.format.name
                    chunk = (tone * 32767).astype(np.int16) if format_.startswith(
                        "s16") else tone.astype(np.float32)
                    frame = av.AudioFrame.from_ndarray(chunk[None], format=format_, layout="mono")
                    frame.sample_rate, frame.pts = 48000, samples[number]
                    container.mux(stream.encode(frame))
                    samples[number] += size
            if text is not None and index % 24 == 0:
                container.mux(subtitle_packet(text, subtitle, index // 24))
            if index < video_start * 24:
                continue
            image = np.stack([(xs * 2 + 5 * index) % 256, (ys * 3 + 7 * index) % 256,
                              (xs + ys + 11 * index) % 256], axis=-1).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, 24)
            container.mux(video.encode(frame))
        for stream in (video, *audio):
            container.mux(stream.encode(None))
    return path


def subtitle_packet(stream, codec: str, second: int) -> av.Packet:
    """A half-second subtitle at ``second`` s, as ``codec`` stores it."""
    words = f"second {second}".encode()
    packet = av.Packet(len(words).to_bytes(2, "big") + words if codec == "mov_text" else words)
    packet.stream, packet.time_base = stream, Fraction(1, 1000)
    packet.pts = packet.dts = second * 1000
    packet.duration = 500
    return packet


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, bytes]:
    """The intact clips' bytes, by name (the name's last part is the suffix to give them)."""
    folder = tmp_path_factory.mktemp("corpus")
    made = {
        "mp4": write_clip(folder / "index-at-end.mp4", subtitle="mov_text"),
        "faststart.mp4": write_clip(folder / "faststart.mp4", subtitle="mov_text",
                                    options={"movflags": "faststart"}),
        "mkv": write_clip(folder / "clip.mkv", subtitle="subrip"),
        "ts": write_clip(folder / "clip.ts"),
        # audio from 0 s, video from 0.5 s
        "late.mkv": write_clip(folder / "late.mkv", video_start=0.5),
        "late.mp4": write_clip(folder / "late.mp4", video_start=0.5),
        "late.ts": write_clip(folder / "late.ts", video_start=0.5),
        "m2ts": write_clip(folder / "clip.m2ts", container_format="mpegts",
                           options={"mpegts_m2ts_mode": "1"}),
    }
    return {name: path.read_bytes() for name, path in made.items()}


def readable_frames(path: Path) -> int:
    """Frames PyAV decodes from ``path`` (skipping packets that fail); 0 if it cannot open it."""
    try:
        return decodable_frames(path)
    except (av.FFmpegError, IndexError):  # unopenable, or no video stream left
        return 0


def zero_bytes(data: bytes, at: float, length: int) -> bytes:
    start = int(len(data) * at)
    return data[:start] + bytes(len(data[start:start + length])) + data[start + length:]


def cut(data: bytes, fraction: float) -> bytes:
    """The first ``fraction`` of ``data``, ending at an odd offset: never between two MPEG-TS
    packets (see test_a_ts_cut_between_two_packets_may_go_unseen_*)."""
    return data[: int(len(data) * fraction) | 1]


DAMAGES = {
    "cut 30%": lambda data: cut(data, 0.3),
    "cut 60%": lambda data: cut(data, 0.6),
    "cut 90%": lambda data: cut(data, 0.9),
    "flipped 4x300": lambda data: flip_bytes(data, 4, 300),
    "flipped 20x40": lambda data: flip_bytes(data, 20, 40),
    "zeroed 2000 at 40%": lambda data: zero_bytes(data, 0.4, 2000),
    "zeroed 20000 at 70%": lambda data: zero_bytes(data, 0.7, 20000),
}
