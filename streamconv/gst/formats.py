"""The video formats the element takes, as GStreamer names them, and what each is to streamconv:
packed frames (RGB, grey...) the filters see as they are, or 4:2:0 planes (I420, NV12, P010)
that go through the same integer colour conversion as ``streamconv run``; the caps the element
offers; and GStreamer's colorimetry in FFmpeg's numbering (the conversion's matrix and range).

Nothing here needs GStreamer itself: the element hands over plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FrameFormatError
from .seam import FULL_RANGE, ColourTags, YuvLayout

PACKED, PLANAR, SEMI_PLANAR = "packed", "planar", "semi-planar"


@dataclass(frozen=True)
class FrameFormat:
    """One video format the element takes.

    Attributes:
        name: GStreamer's name (``RGB``, ``I420``, ``P010_10LE``...).
        kind: PACKED (the frame is one (H, W, C) array), PLANAR (Y, U and V planes, 4:2:0) or
            SEMI_PLANAR (Y, then U and V interleaved, 4:2:0).
        channels: samples per pixel of a packed frame (1, 3 or 4); 3 (RGB) for planes.
        dtype: the buffer's sample type, uint8 or uint16.
        bits: bits per sample of planes (8, 10, 12); 8 or 16 for packed frames.
        shift: bits each sample of a semi-planar frame lies above its value (P010: 6).
    """

    name: str
    kind: str
    channels: int
    dtype: np.dtype
    bits: int = 8
    shift: int = 0

    @property
    def has_planes(self) -> bool:
        """Whether frames are 4:2:0 planes, converted to RGB and back around the filters."""
        return self.kind != PACKED

    @property
    def frame_shape_channels(self) -> int:
        """Channels of the frame the filters see."""
        return 3 if self.has_planes else self.channels

    def layout(self, width: int, height: int, colour: ColourTags) -> YuvLayout:
        """The slot layout of a width x height frame of these planes (I420 order, ``bits`` deep).

        Raises:
            FrameFormatError: an odd width or height (4:2:0 planes need even sizes here).
        """
        if width % 2 or height % 2 or width < 2 or height < 2:
            raise FrameFormatError(
                f"{self.name} frames of {width}x{height}: 4:2:0 planes need an even width and "
                "height "
                "(convert to RGB before streamconv: videoconvert ! video/x-raw,format=RGB)"
            )
        return YuvLayout(width, height, colour, colour.range == FULL_RANGE, self.bits)


_U8, _U16 = np.dtype(np.uint8), np.dtype(np.uint16)

FORMATS = {
    fmt.name: fmt
    for fmt in (
        FrameFormat("RGB", PACKED, 3, _U8),
        FrameFormat("BGR", PACKED, 3, _U8),
        FrameFormat("RGBA", PACKED, 4, _U8),
        FrameFormat("BGRA", PACKED, 4, _U8),
        FrameFormat("RGBx", PACKED, 4, _U8),
        FrameFormat("BGRx", PACKED, 4, _U8),
        FrameFormat("GRAY8", PACKED, 1, _U8),
        FrameFormat("GRAY16_LE", PACKED, 1, _U16, bits=16),
        FrameFormat("I420", PLANAR, 3, _U8),
        FrameFormat("I420_10LE", PLANAR, 3, _U16, bits=10),
        FrameFormat("I420_12LE", PLANAR, 3, _U16, bits=12),
        FrameFormat("NV12", SEMI_PLANAR, 3, _U8),
        FrameFormat("P010_10LE", SEMI_PLANAR, 3, _U16, bits=10, shift=6),
    )
}
"""Every format the element takes in system memory, by GStreamer's name. Per-channel filters do not
care about channel order, so RGB and BGR (and the four 4-byte orders) filter alike."""

DEVICE_FORMATS = tuple(name for name, fmt in FORMATS.items() if not fmt.has_planes)
"""The formats the element takes in CUDA memory: packed frames, filtered where they lie (4:2:0
planes in CUDA memory go through ``cudaconvert`` to RGBA first)."""

CUDA_FEATURE = "memory:CUDAMemory"
"""GStreamer's caps feature of frames in CUDA device memory (the nvcodec elements)."""

_RANGE = "width=(int)[1,32767], height=(int)[1,32767], framerate=(fraction)[0/1,2147483647/1]"


def caps_string(*, device: bool) -> str:
    """The caps the element offers on both pads: system memory (``device=False``) or CUDA memory."""
    if device:
        return (
            f"video/x-raw({CUDA_FEATURE}), format=(string){{{', '.join(DEVICE_FORMATS)}}}, {_RANGE}"
        )
    return f"video/x-raw, format=(string){{{', '.join(FORMATS)}}}, {_RANGE}"


def frame_format(name: str, *, device: bool = False) -> FrameFormat:
    """The FrameFormat of GStreamer format ``name`` (in CUDA memory when ``device``).

    Raises:
        FrameFormatError: a format the element does not take there.
    """
    taken = DEVICE_FORMATS if device else tuple(FORMATS)
    if name not in taken:
        where = "in CUDA memory" if device else "in system memory"
        raise FrameFormatError(
            f"video format {name} is not one streamconv takes {where}; it takes {', '.join(taken)}"
        )
    return FORMATS[name]


# GstVideoColorMatrix -> AVColorSpace: RGB 0, FCC 4, BT.709 1, BT.601 6 (SMPTE 170M), SMPTE 240M 7,
# BT.2020 9 (non-constant luminance); unknown stays unspecified (2), which reads as BT.601.
_MATRICES = {1: 0, 2: 4, 3: 1, 4: 6, 5: 7, 6: 9}
# GstVideoColorRange -> AVColorRange: 0..255 is full (2), 16..235 limited (1), unknown 0.
_RANGES = {1: FULL_RANGE, 2: 1}
_UNSPECIFIED = 2


def colour_tags(matrix: int, colour_range: int) -> ColourTags:
    """The ColourTags of GStreamer colorimetry: a GstVideoColorMatrix and a GstVideoColorRange
    number (as ints). GStreamer names a matrix for every stream (its own guess, from the frame size,
    where the stream says nothing), so its caps decide the conversion."""
    return ColourTags(
        space=_MATRICES.get(int(matrix), _UNSPECIFIED), range=_RANGES.get(int(colour_range), 0)
    )
