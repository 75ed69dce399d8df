"""Test clips made here: moving random pictures, so every frame differs and codecs have work."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest


def write_clip(path: Path, codec: str = "libx264", pix_fmt: str = "yuv420p", frames: int = 24,
               size=(96, 64), *,
               options: dict | None = None, seed: int = 1, rate: int = 25) -> Path:
    """A ``frames``-long clip of ``size`` (W, H): a wide random picture sliding 3 pixels a frame."""
    if codec not in av.codecs_available:
        pytest.skip(f"this PyAV build has no {codec}")
    width, height = size
    base = np.random.default_rng(seed).integers(0, 256, (height, width * 2, 3), dtype=np.uint8)
    rgb_format = "rgb48le" if "10" in pix_fmt or "12" in pix_fmt else "rgb24"
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = options if options is not None else {"preset": "ultrafast", "g": "6"}
        for index in range(frames):
            start = 3 * index % width
            picture = np.ascontiguousarray(base[:, start: start + width])
            if rgb_format == "rgb48le":
                picture = picture.astype(np.uint16) * 257
            frame = av.VideoFrame.from_ndarray(picture, format=rgb_format)
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def write_av_clip(path: Path, *, codec: str = "libx264", pix_fmt: str = "yuv420p",
                  frames: int = 50, rate: int = 25, size=(96, 64), options: dict | None = None,
                  sample_rate: int = 48000) -> Path:
    """write_clip's moving random picture (``frames`` at ``rate``; H.264 with 2 B-frames and a
    keyframe every 6 frames by default) with a sine tone of the same length in AAC."""
    if codec not in av.codecs_available:
        pytest.skip(f"this PyAV build has no {codec}")
    width, height = size
    base = np.random.default_rng(1).integers(0, 256, (height, width * 2, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        video = container.add_stream(codec, rate=rate)
        video.width, video.height, video.pix_fmt = width, height, pix_fmt
        video.options = options if options is not None else {
            "preset": "ultrafast", "g": "6", "x264-params": "bframes=2:b-adapt=0"}
        sound = container.add_stream("aac", rate=sample_rate)
        sound.layout = "mono"
        step = sound.codec_context.frame_size or 1024
        samples, total = 0, frames * sample_rate // rate
        for index in range(frames):
            start = 3 * index % width
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(base[:, start: start + width]),
                                               format="rgb24")
            frame.pts = index
            container.mux(video.encode(frame))
            while samples < (index + 1) * sample_rate // rate and samples < total:
                tone = np.sin(2 * np.pi * 440 * np.arange(samples, samples + step) / sample_rate)
                chunk = av.AudioFrame.from_ndarray((0.3 * tone).astype(np.float32)[None],
                                                   format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = sample_rate, samples
                container.mux(sound.encode(chunk))
                samples += step
        container.mux(video.encode(None))
        container.mux(sound.encode(None))
    return path


def encode_ts(width: int, height: int, frames: int, first_pts: int,
              rng: np.random.Generator) -> bytes:
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
