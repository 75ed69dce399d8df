"""Short H.264 clips with an AAC track, in the containers the reliability tests read."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


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
                tone = (0.2 * np.sin(2 * np.pi * 440 * (np.arange(1024) + samples) / 48000)).astype(
                    np.float32)
                chunk = av.AudioFrame.from_ndarray(np.stack([tone, tone]), format="fltp",
                                                   layout="stereo")
                chunk.sample_rate, chunk.pts = 48000, samples
                for packet in audio.encode(chunk):
                    container.mux(packet)
                samples += 1024
        for stream in (video, audio):
            for packet in stream.encode(None):
                container.mux(packet)
    return path
