"""The unit that moves through a pipeline: a slot of host buffers, its frame's metadata and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .yuv import YuvLayout


@dataclass
class FrameMeta:
    """What travels with a frame: its position, timestamp and time base.

    Attributes:
        index: 0-based frame number in the run.
        pts: presentation timestamp in ``time_base`` units, or None if the source has none.
        time_base: seconds per pts unit.
        captured: ``time.perf_counter()`` when the frame was captured (live sources) or
            when reading it began (files); the origin of the ``latency`` stage.
        packets: compressed packets of the input's other streams (audio, subtitles) read
            since the previous frame, for a file sink to copy unchanged before this frame.
    """

    index: int
    pts: int | None
    time_base: Fraction | None
    captured: float | None = None
    packets: list = field(default_factory=list)


class _Resized:
    """The type of RESIZED."""

    def __repr__(self) -> str:
        return "RESIZED"


RESIZED = _Resized()
"""What ``Source.read_into`` returns, instead of a FrameMeta, when the next frame has another
size: the source's ``shape`` (and ``planes``) already describe it and the next call delivers it
into a buffer of that shape."""


@dataclass
class Slot:
    """One ring entry: input and output host buffers plus backend-owned device state.

    Attributes:
        index: position in the ring.
        host_in: (H, W, C) uint8 host buffer the source fills (page-locked on the CUDA backend),
            or with ``planes``, the frame's flat (1.5 W H,) uint8 yuv420p planes.
        host_out: the same shape: the buffer the sink reads.
        device: backend-private state (device buffers, stream, events), None on the CPU.
        meta: the frame now in the slot.
        times: seconds spent per stage for the frame now in the slot.
        started: perf_counter() when reading of the frame began (latency origin).
        planes: the YUV layout when the buffers hold planes (the backend converts colour),
            None for RGB frames.
    """

    index: int
    host_in: np.ndarray
    host_out: np.ndarray
    device: Any = None
    meta: FrameMeta | None = None
    times: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    planes: YuvLayout | None = None

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of the frame the filters see (RGB for planes)."""
        return self.planes.frame_shape if self.planes is not None else self.host_in.shape

    @property
    def frame_dtype(self) -> np.dtype:
        """Sample type of the frame the filters see: uint8 or uint16 (RGB for planes)."""
        return self.planes.frame_dtype if self.planes is not None else self.host_in.dtype

    def reset(self) -> None:
        """Forget the previous frame before the slot is refilled."""
        self.meta = None
        self.times.clear()
        self.started = 0.0
