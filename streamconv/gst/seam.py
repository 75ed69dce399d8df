"""The streamconv internals the GStreamer element builds on, imported here and nowhere else in
this package: the slot ring of the backends (what ``streamconv run`` drives), the 4:2:0 layout
and its integer colour maths, the colour tags, and the driver calls on raw CUDA handles.
Everything else the element uses is public."""

from __future__ import annotations

from ..embed.filter import make_engine
from ..backends.protocol import Backend
from ..gpu.device import cuda_status
from ..frames.checks import MAX_RING
from ..gpu import handles
from ..gpu.binding import GpuCallError, binding
from ..frames.colour import FULL_RANGE, ColourTags
from ..frames.yuv import YuvLayout, split_semi_planar
from ..frames.slots import Slot
from ..run.inflight import InFlight

__all__ = [
    "FULL_RANGE",
    "MAX_RING",
    "Backend",
    "ColourTags",
    "InFlight",
    "Slot",
    "YuvLayout",
    "cuda_status",
    "GpuCallError",
    "binding",
    "handles",
    "make_engine",
    "split_semi_planar",
]
