"""Clips with audio and their packets, for the segmented runs."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np


RATE, SAMPLE_RATE, SAMPLES = 25, 48000, 1024


def make_clip(path: Path, codec: str, *, frames: int = 48, gop: int = 8, size=(64, 48),
              bframes: int = 0,
              rate: int = RATE, times: list[int] | None = None, open_gop: bool = False,
              options: dict[str, str] | None = None) -> Path:
    """``frames`` frames of a sliding random picture, a keyframe every ``gop``, up to ``bframes``
    B-frames in a row (libx264; ``open_gop``: B-frames after a keyframe may show before it and
    refer to the GOP before), and an AAC track; ``times``: the frames' pts in ms (irregular:
    variable frame rate), else one every 1/``rate`` s; ``options``: the muxer's."""
    width, height = size
    base = np.random.default_rng(3).integers(0, 256, (height, 2 * width, 3), np.uint8)
    with av.open(str(path), "w", options=options or {}) as container:
        video = container.add_stream(codec, rate=rate)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.options = {"g": str(gop),
                         **({"preset": "ultrafast", "bf": str(bframes)} if codec == "libx264"
                            else {})}
        if open_gop:
            video.options = {**video.options, "x264-params": "open-gop=1:scenecut=0"}
        if times is not None:
            video.time_base = video.codec_context.time_base = Fraction(1, 1000)
        audio = container.add_stream("aac", rate=SAMPLE_RATE)
        audio.codec_context.layout = "stereo"
        for index in range(frames):
            start = 3 * index % width
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(base[:, start:start + width]),
                                               format="rgb24")
            frame.pts, frame.time_base = (index,
                                          Fraction(1,
                                                   rate)) if times is None else (
                                                       times[index], Fraction(1, 1000))
            container.mux(video.encode(frame))
        for start in range(0, frames * SAMPLE_RATE // rate, SAMPLES):
            wave = (0.3 * np.sin(2 * np.pi * 440 * (np.arange(
                SAMPLES) + start) / SAMPLE_RATE)).astype(np.float32)
            chunk = av.AudioFrame.from_ndarray(np.stack([wave, wave]), format="fltp",
                                               layout="stereo")
            chunk.sample_rate, chunk.pts, chunk.time_base = SAMPLE_RATE, start, Fraction(
                1, SAMPLE_RATE)
            container.mux(audio.encode(chunk))
        for stream in (video, audio):
            container.mux(stream.encode(None))
    return path


def decoded(path: Path) -> tuple[list[int], list[np.ndarray]]:
    """The video's frames' pts and RGB pictures; damage the decoder finds fails the test."""
    pts, pictures = [], []
    with av.open(str(path)) as container:
        for packet in container.demux(video=0):
            for frame in packet.decode():
                assert not frame.is_corrupt, f"{path.name}: corrupt frame at pts {frame.pts}"
                pts.append(frame.pts)
                pictures.append(frame.to_ndarray(format="rgb24"))
    return pts, pictures


def packets(path: Path, kind: str) -> list[tuple[int, bytes]]:
    """(pts, payload) of every packet of the first ``kind`` stream, in file order."""
    with av.open(str(path)) as container:
        streams = getattr(container.streams, kind)
        return [(p.pts, bytes(p)) for p in container.demux(streams[0]) if p.size] if streams else []


def keyframes(path: Path) -> list[int]:
    with av.open(str(path)) as container:
        return [p.pts for p in container.demux(video=0) if p.size and p.is_keyframe]
