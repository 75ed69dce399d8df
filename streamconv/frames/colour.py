"""Colour between a file's YUV and the RGB frames the filters see: matrix and range honoured.

A decoded frame says how its YUV maps to RGB (BT.601 or BT.709 matrix, limited or full
range). Converting with the wrong one shifts every colour (a BT.709 clip read as BT.601
moves Y by up to 20 levels), so the reader converts with the frame's own, and the writer
converts back with the same and tags the output alike. Untagged video gets FFmpeg's
defaults both ways (BT.601, limited range), which round-trips too. Every conversion by
FFmpeg's scaler goes through :func:`convert`, which makes it deterministic.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import av
import numpy as np
from av.video.reformatter import ColorRange, Colorspace, VideoReformatter

# SWS_CS_BT2020: PyAV names it from 18 on (which needs Python 3.11); older releases take the number.
_BT2020 = getattr(Colorspace, "BT2020", 9)
# FFmpeg's AVColorSpace numbers -> the matrices its scaler knows.
_MATRICES = {1: Colorspace.ITU709, 4: Colorspace.FCC, 5: Colorspace.ITU601, 6: Colorspace.ITU601,
             7: Colorspace.SMPTE240M, 9: _BT2020, 10: _BT2020}
FULL_RANGE = 2  # AVCOL_RANGE_JPEG
UNSPECIFIED = 2  # AVCOL_SPC_UNSPECIFIED, AVCOL_PRI_UNSPECIFIED, AVCOL_TRC_UNSPECIFIED
RGB_SPACE = 0  # AVCOL_SPC_RGB: the samples are R, G and B themselves (PNG, GIF, libx264rgb)
BT601 = 6  # AVCOL_SPC_SMPTE170M: the matrix the scaler converts with when none is named


@dataclass(frozen=True)
class ColourTags:
    """A stream's colour description, in FFmpeg's numbering (AVColorSpace, AVColorRange, ...).

    Attributes:
        space: matrix (1 BT.709, 5/6 BT.601, 9 BT.2020, 2 unspecified).
        range: 1 limited (16..235), 2 full (0..255), 0 unspecified (read as limited).
        primaries, trc: carried to the output's tags unchanged.
    """

    space: int = UNSPECIFIED
    range: int = 0
    primaries: int = UNSPECIFIED
    trc: int = UNSPECIFIED

    @classmethod
    def of(cls, described) -> "ColourTags":
        """The tags of a decoded frame or a codec context."""
        return cls(int(described.colorspace), int(described.color_range),
                   int(described.color_primaries), int(described.color_trc))

    @property
    def matrix(self) -> Colorspace | int | None:
        """The scaler's matrix, or None for its default (BT.601)."""
        return _MATRICES.get(self.space)

    @property
    def scaler_range(self) -> ColorRange:
        return ColorRange.JPEG if self.range == FULL_RANGE else ColorRange.MPEG

    def tag(self, codec_context) -> None:
        """Write these tags into an encoder's codec context."""
        codec_context.colorspace = self.space
        codec_context.color_range = self.range
        codec_context.color_primaries = self.primaries
        codec_context.color_trc = self.trc


_scalers = threading.local()  # one scaler per thread: the reader and writer convert at once


def convert(frame: av.VideoFrame, **reformat) -> av.VideoFrame:
    """``frame`` (host memory) converted by FFmpeg's scaler on one thread, deterministically.

    ``reformat``: what :meth:`av.video.reformatter.VideoReformatter.reformat` takes (format,
    width, height, the colour arguments). Returns a new frame, or ``frame`` itself where
    nothing is to be done. The scaler's own threads race on the rows where their slices meet
    (libswscale 9 and 10, as in PyAV 18's and 19's wheels): the first 8 samples of such rows
    came out different from one run to the next, by up to hundreds of codes, in 10-bit
    conversions. Each thread keeps its scaler, so its set-up is not paid again every frame.
    """
    scaler = getattr(_scalers, "scaler", None)
    if scaler is None:
        scaler = _scalers.scaler = VideoReformatter()
    return scaler.reformat(frame, threads=1, **reformat)


def format_bits(pix_fmt: str | av.VideoFormat) -> int:
    """Bits per sample of an FFmpeg pixel format (8 for yuv420p, 10 for yuv420p10le)."""
    video_format = pix_fmt if isinstance(pix_fmt, av.VideoFormat) else av.VideoFormat(pix_fmt)
    return max((c.bits for c in video_format.components), default=8)


def chroma_steps(pix_fmt: str) -> tuple[int, int]:
    """What a frame's width and height must be multiples of in ``pix_fmt``: 2 and 2 for 4:2:0,
    2 and 1 for 4:2:2, 4 and 1 for 4:1:1; 1 and 1 for RGB, grey and 4:4:4."""
    probe = av.VideoFormat(pix_fmt, 64, 64)
    if probe.is_rgb or len(probe.components) < 3:
        return 1, 1
    chroma = probe.components[1]
    return 64 // chroma.width, 64 // chroma.height


def is_transparent(frame: av.VideoFrame) -> bool:
    """Whether a decoded frame (host memory) has alpha (its format's, or a palette's) and some
    pixel of it is not opaque: the filters see RGB, so that transparency is lost."""
    video_format = frame.format
    if not video_format.has_palette and not any(c.is_alpha for c in video_format.components):
        return False
    return bool((convert(frame, format="rgba").to_ndarray()[..., 3] < 255).any())


def plane_rows(plane, dtype, rows: int) -> np.ndarray:
    """A PyAV frame plane as a (rows, line size in samples) view of ``dtype`` samples, host
    memory, no copy: decoder and encoder rows may be padded past the picture's width."""
    return np.frombuffer(plane, dtype).reshape(rows, -1)


def frame_to_rgb(frame: av.VideoFrame, rgb_format: str = "rgb24") -> av.VideoFrame:
    """The frame as ``rgb_format`` (rgb24, or rgb48le for 16 bits; host memory), converted with
    its own matrix and range."""
    tags = ColourTags.of(frame)
    return convert(frame, format=rgb_format, src_colorspace=tags.matrix,
                   src_color_range=tags.scaler_range)


def rgb_to_frame(rgb: np.ndarray, pix_fmt: str, tags: ColourTags | None) -> av.VideoFrame:
    """An (H, W, 3) uint8 or uint16 RGB host array (C-contiguous) as a frame of ``pix_fmt``,
    with ``tags``' matrix and range.

    ``tags`` None converts with FFmpeg's defaults for a YUV format, and with no matrix at all
    for an RGB one (see :func:`yuv_tags`). The frame is converted here, never by the encoder
    (whose scaler runs on the encoder's threads: see :func:`convert`). The frame returned
    never shares ``rgb``'s memory: the caller may reuse it as soon as this returns.
    """
    rgb_format = "rgb48le" if rgb.dtype == np.uint16 else "rgb24"
    colour = {} if tags is None else {"dst_colorspace": tags.matrix,
                                      "dst_color_range": tags.scaler_range}
    converted = convert(av.VideoFrame.from_numpy_buffer(rgb, format=rgb_format), format=pix_fmt,
                        **colour)
    if converted.planes[0].buffer_ptr != rgb.ctypes.data:  # the scaler wrote a new frame
        return converted
    # A copy: a frame-threaded encoder (png) reads a frame after send returns, and a frame
    # wrapping the caller's buffer would be encoded from whatever it holds by then.
    return av.VideoFrame.from_ndarray(rgb, format=rgb_format)


def yuv_tags(pix_fmt: str, tags: ColourTags | None) -> ColourTags | None:
    """``tags`` if converting RGB to ``pix_fmt`` needs a matrix (a YUV format), else None."""
    return None if tags is None or av.VideoFormat(pix_fmt).is_rgb else written_tags(pix_fmt, tags)


def written_tags(pix_fmt: str, tags: ColourTags | None) -> ColourTags | None:
    """The input's ``tags`` made true of ``pix_fmt`` frames converted from the filters' RGB.

    An RGB output is tagged RGB, full range (a YUV matrix on it makes decoders read its planes
    as Y, U and V); a YUV output of RGB input gets the matrix it is converted with (BT.601), as
    an RGB tag would make decoders take its planes for G, B and R. Primaries and transfer stay.
    """
    if tags is None:
        return None
    if av.VideoFormat(pix_fmt).is_rgb:
        return replace(tags, space=RGB_SPACE, range=FULL_RANGE)
    return replace(tags, space=BT601) if tags.space == RGB_SPACE else tags
