"""The unit that moves through a pipeline: a slot of host buffers, its frame's metadata and timings
(:mod:`streamconv.run.inflight` keeps the slots a backend is working on in order)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import FrameFormatError
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
        context: read only for the windows of a chain's stages across frames (a segment's
            neighbours' frames around its cuts): filtered, never written nor counted.
    """

    index: int
    pts: int | None
    time_base: Fraction | None
    captured: float | None = None
    packets: list = field(default_factory=list)
    context: bool = False


class _Resized:
    """The type of RESIZED."""

    def __repr__(self) -> str:
        return "RESIZED"


RESIZED = _Resized()
"""What ``Source.read_into`` returns, instead of a FrameMeta, when the next frame has another
size: the source's ``shape`` (and ``planes``) already describe it and the next call delivers it
into a buffer of that shape."""


@dataclass
class DeviceInput:
    """Where a source that decodes on the GPU writes a slot's frame
    (``Source.read_into(DeviceInput)``).

    Attributes:
        address: device address of the flat 4:2:0 planes (``layout``: Y, then U, then V, rows
            packed; ``layout.nbytes`` bytes of ``layout.dtype`` samples), in the backend's device.
        layout: the planes' size, depth and colour.
        written: a CUDA event (of the device's primary context) the source records on its own
            stream after its last write; the backend's stream waits for it before reading.
    """

    address: int
    layout: YuvLayout
    written: Any


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
        out_planes: the layout of ``host_out``'s planes when the chain changes the frame's size
            (``scale``, ``crop``); None: ``planes``'.
        device_input: where a GPU-decoding source writes the frame instead of ``host_in`` (then
            an empty placeholder), None when frames arrive in host memory.
        has_output: whether the backend put an output frame in ``host_out`` for the last submit
            (False while a chain with stages across frames fills its window).
        counts_at_read: frames dropped and damaged packets or frames found, in all, when the
            frame was read (where the run's timeline marks them).
    """

    index: int
    host_in: np.ndarray
    host_out: np.ndarray
    device: Any = None
    meta: FrameMeta | None = None
    times: dict[str, float] = field(default_factory=dict)
    started: float = 0.0
    planes: YuvLayout | None = None
    device_input: DeviceInput | None = None
    has_output: bool = True
    out_planes: YuvLayout | None = None
    counts_at_read: tuple[int, int] = (0, 0)

    @property
    def input_target(self) -> np.ndarray | DeviceInput:
        """What the source reads the frame into: ``device_input`` if the slot has one, else
        ``host_in``."""
        return self.device_input if self.device_input is not None else self.host_in

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of the frame the filters see (RGB for planes)."""
        return self.planes.frame_shape if self.planes is not None else self.host_in.shape

    @property
    def out_shape(self) -> tuple[int, int, int]:
        """(h, w, C) of the frame the chain makes (RGB for planes): ``frame_shape`` unless a stage
        changes the size."""
        if self.planes is not None:
            return (self.out_planes or self.planes).frame_shape
        return self.host_out.shape

    @property
    def frame_dtype(self) -> np.dtype:
        """Sample type of the frame the filters see: uint8 or uint16 (RGB for planes)."""
        return self.planes.frame_dtype if self.planes is not None else self.host_in.dtype

    def reset(self) -> None:
        """Forget the previous frame before the slot is refilled."""
        self.meta = None
        self.times.clear()
        self.started = 0.0
        self.has_output = True


def resized_planes(layout: YuvLayout, shape: tuple[int, ...]) -> YuvLayout | None:
    """``layout`` (depth, colour) for frames of (h, w, C) ``shape``; ``layout`` itself at its own
    size, None where 4:2:0 planes cannot hold the size (an odd side)."""
    height, width = shape[0], shape[1]
    if (width, height) == (layout.width, layout.height):
        return layout
    if width % 2 or height % 2:
        return None
    return replace(layout, width=width, height=height)


def output_planes(layout: YuvLayout | None, shape: tuple[int, ...]) -> YuvLayout | None:
    """A slot's ``out_planes`` for a chain whose output is (h, w, C) ``shape``: None without
    planes (``layout`` None), else :func:`resized_planes`.

    Raises:
        FrameFormatError: the output has an odd side, which 4:2:0 planes cannot hold.
    """
    if layout is None:
        return None
    resized = resized_planes(layout, shape)
    if resized is None:
        raise FrameFormatError(f"4:2:0 planes cannot hold the chain's {shape[1]}x{shape[0]} output")
    return resized
