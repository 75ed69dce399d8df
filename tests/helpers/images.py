"""Image files for the sequence tests: written, read, and their size."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


W, H = 64, 48


def write_images(folder: Path, count: int = 5, pattern: str = "img%03d.png", seed: int = 3,
                 smooth: bool = False) -> list[np.ndarray]:
    """``count`` RGB pictures, random or (``smooth``) gradients, as PNG files named by ``pattern``
    from 1; returns them."""
    rng = np.random.default_rng(seed)
    if smooth:  # what lossy image codecs are made for
        ramp = np.add.outer(np.arange(H), np.arange(W)) * 2
        pictures = [np.stack([(ramp + o) % 256 for o in rng.integers(0, 64, 3)],
                             -1).astype(np.uint8)
                    for _ in range(count)]
    else:
        pictures = list(rng.integers(0, 256, (count, H, W, 3), dtype=np.uint8))
    for number, picture in enumerate(pictures, 1):
        frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
        with av.open(str(folder / (pattern % number)), "w", format="image2") as container:
            stream = container.add_stream("png", rate=1)
            stream.width, stream.height, stream.pix_fmt = W, H, "rgb24"
            for packet in [*stream.encode(frame), *stream.encode(None)]:
                container.mux(packet)
    return pictures


def read_image(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")
