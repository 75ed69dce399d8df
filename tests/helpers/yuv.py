"""Clips of 4:2:0 video of a given matrix, range and depth."""

from __future__ import annotations

import av
import numpy as np


def make_clip(path, width: int, height: int, frames: int, *, pix_fmt: str = "yuv420p",
              space: int = 1, colour_range: int = 1, rng=None) -> list[np.ndarray]:
    """A lossless H.264 clip of random-ish frames; returns each frame's flat planes."""
    rng = rng or np.random.default_rng(7)
    written = []
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = {"qp": "0", "preset": "ultrafast"}
        stream.codec_context.colorspace, stream.codec_context.color_range = space, colour_range
        for index in range(frames):
            smooth = rng.integers(40, 200,
                                  (height * 3 // 2 // 2 + 1, width // 2 + 1)).astype(np.uint8)
            planes = np.repeat(np.repeat(smooth, 2, 0), 2, 1)[: height * 3 // 2, :width].copy()
            frame = av.VideoFrame.from_ndarray(planes, format=pix_fmt)
            frame.colorspace, frame.color_range, frame.pts = space, colour_range, 3 * index + 1
            for packet in stream.encode(frame):
                container.mux(packet)
            written.append(planes.ravel())
        for packet in stream.encode(None):
            container.mux(packet)
    return written
