"""The Source base class: what every frame source gives a pipeline.

Every source is a context manager with an idempotent ``close()``. The pipeline calls
``read_into(buffer)``, which writes the next frame straight into a slot's host buffer
and returns its FrameMeta, or None at the end. Iterating a source yields new arrays.
The sources themselves are beside this module in streamconv.io; ``open_source``
(streamconv.io.open) opens one from a spec.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterator

import numpy as np

from ...frames.slots import RESIZED, FrameMeta
from ...frames.yuv import YuvLayout


class Source:
    """Base class: (H, W, C) frames of a fixed size and sample type.

    Attributes:
        width, height, channels: frame geometry.
        dtype: the samples' type: uint8, or uint16 for deeper video (10-bit and up), whose
            samples then span 0..65535.
        frame_rate: frames per second (nominal).
        time_base: seconds per pts unit of the frames' timestamps.
        frame_count: number of frames if known in advance, else None.
        is_live: True for sources that must not be blocked (they drop instead).
        planes: the YuvLayout of the frames if ``read_into`` can also deliver them as
            unconverted yuv420p planes, else None.
    """

    width: int
    height: int
    channels: int = 3
    dtype: np.dtype = np.dtype(np.uint8)
    frame_rate: Fraction = Fraction(30)
    time_base: Fraction = Fraction(1, 30)
    frame_count: int | None = None
    is_live = False
    planes: YuvLayout | None = None
    name = "source"

    @property
    def shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every frame."""
        return (self.height, self.width, self.channels)

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Write the next frame into ``buffer`` ((H, W, C) host array of ``dtype``) and return
        its metadata.

        Returns:
            The frame's FrameMeta, or None when the source is exhausted, or (sources whose
            frame size can change) ``slots.RESIZED``: nothing was written, ``shape`` now gives
            the next frame's size, and the next call delivers that frame.
        """
        raise NotImplementedError

    def describe(self) -> str:
        """One line for logs: what it is, its size and rate."""
        return f"{self.name} {self.width}x{self.height} @ {float(self.frame_rate):g} fps"

    def interrupt(self) -> None:
        """A stop was asked for (safe from any thread): a read waiting for data returns without
        a frame, where the source can tell (a camera, a stream); here nothing waits."""

    def close(self) -> None:
        """Release the source; safe to call more than once."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[np.ndarray]:
        """New (H, W, C) host arrays of ``dtype``, one per frame (the shape follows a size
        change)."""
        while True:
            frame = np.empty(self.shape, self.dtype)
            meta = self.read_into(frame)
            if meta is None:
                return
            if meta is not RESIZED:
                yield frame
