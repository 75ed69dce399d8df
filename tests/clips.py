"""Test clips made here: moving random pictures, so every frame differs and codecs have work."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest


def write_clip(path: Path, codec: str = "libx264", pix_fmt: str = "yuv420p", frames: int = 24, size=(96, 64), *,
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
