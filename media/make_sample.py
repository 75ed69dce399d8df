"""Regenerate media/sample.mp4: 4 s of 640x360 H.264 at 30 fps, drawn with NumPy and OpenCV.

The scene has what filters act on: smooth gradients (blur must leave them alone),
hard edges and thin lines (edge, sharpen), text, a textured noise patch, and motion.

    python media/make_sample.py [OUTPUT]
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

WIDTH, HEIGHT, FPS, SECONDS = 640, 360, 30, 4


def draw_frame(index: int, texture: np.ndarray) -> np.ndarray:
    """Frame ``index`` as a (360, 640, 3) uint8 RGB array."""
    t = index / FPS
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    frame = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    frame[..., 0] = 40 + 150 * xs / WIDTH
    frame[..., 1] = 60 + 120 * ys / HEIGHT
    frame[..., 2] = 120 + 80 * np.sin(xs / 90 + t)
    cx = int(WIDTH / 2 + 200 * np.cos(1.3 * t))
    cy = int(HEIGHT / 2 + 110 * np.sin(2.1 * t))
    cv2.circle(frame, (cx, cy), 48, (250, 210, 40), -1, cv2.LINE_AA)
    angle = 40 * t
    box = cv2.boxPoints(((160, 250), (150, 70), angle)).astype(np.int32)
    cv2.fillPoly(frame, [box], (30, 30, 200), cv2.LINE_AA)
    for k in range(8):  # thin lines of growing width
        x = 440 + 22 * k
        cv2.line(frame, (x, 30), (x + 40, 150), (255, 255, 255), 1 + k // 3, cv2.LINE_AA)
    frame[210:330, 470:610] = texture[(index * 2) % 60:(index * 2) % 60 + 120, :140]
    cv2.putText(frame, f"streamconv {t:4.2f}s", (24, 48), cv2.FONT_HERSHEY_SIMPLEX, 1.1,
                (255, 255, 255), 2, cv2.LINE_AA)
    return frame


def main(output: str) -> None:
    rng = np.random.default_rng(7)
    texture = cv2.GaussianBlur(rng.integers(0, 256, (180, 140, 3), dtype=np.uint8), (3, 3), 0)
    with av.open(output, mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.time_base = Fraction(1, FPS)
        stream.options = {"crf": "20", "preset": "slow"}
        for index in range(FPS * SECONDS):
            frame = av.VideoFrame.from_ndarray(draw_frame(index, texture), format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_name("sample.mp4")))
