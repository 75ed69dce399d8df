"""What NVDEC (the GPU's hardware decoders, through PyNvVideoCodec) can decode on a device.

A stream goes to NVDEC only if its codec, chroma format (4:2:0: what the slots carry), bit depth
and size are in the device's capabilities, asked once per (device, codec, depth) and remembered:
each query opens a CUDA context of its own. ``decoder_table`` lists them for ``streamconv info``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from ....errors import BackendUnavailableError
from ....frames.yuv import DEEP_PLANE_FORMATS, PLANE_FORMATS

DECODERS = ("auto", "cpu", "nvdec")
"""The ``--decoder`` choices: NVDEC where it can (auto), libavcodec on the CPU, or NVDEC or an
error."""

CODECS = {"h264": "H264", "hevc": "HEVC", "av1": "AV1", "vp9": "VP9", "vp8": "VP8",
          "mpeg1video": "MPEG1", "mpeg2video": "MPEG2", "mpeg4": "MPEG4", "vc1": "VC1"}
"""FFmpeg codec names NVDEC may take -> their ``cudaVideoCodec`` member names."""

FORMAT_DEPTHS = {**{name: 8 for name in PLANE_FORMATS}, **DEEP_PLANE_FORMATS}
"""Decoded pixel formats NVDEC can deliver as 4:2:0 planes (NV12 or P016), by bit depth."""


def _info_to_debug(record: logging.LogRecord) -> bool:
    """Pass PyNvVideoCodec's warnings and errors; its INFO lines only when the root logger shows
    DEBUG."""
    return record.levelno >= logging.WARNING or logging.getLogger().isEnabledFor(logging.DEBUG)


class NvdecUnsupported(BackendUnavailableError):
    """NVDEC cannot take this stream here (exit 7 under ``--decoder nvdec``); the message says
    what."""


class NvdecMissing(NvdecUnsupported):
    """PyNvVideoCodec is not installed: the CPU decoder is then the plain default, not a
    fallback."""


@dataclass(frozen=True)
class DecoderCaps:
    """One (codec, bit depth) row of a device's NVDEC capabilities (4:2:0)."""

    codec: str
    bits: int
    supported: bool
    max_width: int = 0
    max_height: int = 0
    min_width: int = 0
    min_height: int = 0
    engines: int = 0
    max_macroblocks: int = 0  # 16 x 16 blocks per frame (0: not reported)

    def refuses(self, width: int, height: int) -> str | None:
        """Why a width x height stream cannot be decoded, or None if it can."""
        if not self.supported:
            return f"{self.codec} {self.bits}-bit 4:2:0 is not supported by this GPU's NVDEC"
        if not (self.min_width <= width <= self.max_width
                and self.min_height <= height <= self.max_height):
            return (f"{width}x{height} is outside NVDEC's {self.min_width}x{self.min_height} to "
                    f"{self.max_width}x{self.max_height} for {self.codec}")
        blocks = ((width + 15) // 16) * ((height + 15) // 16)
        if self.max_macroblocks and blocks > self.max_macroblocks:
            return (f"{width}x{height} has more than NVDEC's {self.max_macroblocks} macroblocks "
                    f"for {self.codec}")
        return None


def nvdec_module():
    """PyNvVideoCodec, or NvdecUnsupported naming the extra to install."""
    # It logs its driver checks at INFO on import, its logger forced to INFO: keep them to -v.
    logging.getLogger("PyNvVideoCodec").addFilter(_info_to_debug)
    try:
        import PyNvVideoCodec  # optional (the nvdec extra)
    except ImportError:
        raise NvdecMissing("PyNvVideoCodec is not installed (pip install "
                           "'streamconv[nvdec]')") from None
    except Exception as exc:  # its import loads the driver's libnvcuvid
        raise NvdecUnsupported(f"PyNvVideoCodec cannot load here: {exc}") from None
    return PyNvVideoCodec


@functools.lru_cache(maxsize=None)
def decoder_caps(device: int, codec: str, bits: int) -> DecoderCaps:
    """NVDEC's capabilities on ``device`` for 4:2:0 ``codec`` (an FFmpeg name) at ``bits`` per
    sample.

    Raises:
        NvdecUnsupported: PyNvVideoCodec missing, or a codec NVDEC has no decoder for.
    """
    nvc = nvdec_module()
    if codec not in CODECS:
        raise NvdecUnsupported(f"NVDEC has no {codec} decoder")
    try:
        caps = nvc.GetDecoderCaps(gpuid=device, codec=getattr(nvc.cudaVideoCodec, CODECS[codec]),
                                  chromaformat=getattr(nvc.cudaVideoChromaFormat, "420"),
                                  bitdepth=bits)
    except Exception as exc:  # no device, no driver support
        raise NvdecUnsupported(f"NVDEC capabilities could not be read on device {device}: "
                               f"{exc}") from None

    def field(name: str) -> int:
        value = caps.get(name, 0) if isinstance(caps, dict) else getattr(caps, name, 0)
        return int(value or 0)

    return DecoderCaps(codec, bits, bool(field("supported")), field("width_max"),
                       field("height_max"),
                       field("width_min"), field("height_min"), field("num_decoder_engines"),
                       field("mb_num_max"))


def check_stream(device: int, codec: str, pix_fmt: str | None, width: int, height: int,
                 interlaced: bool = False) -> int:
    """The bit depth NVDEC decodes a ``codec`` stream of ``pix_fmt`` at width x height in
    (``interlaced``: libavcodec decodes its pictures as interlaced).

    Raises:
        NvdecUnsupported: the stream, or this machine, is not one NVDEC takes; the message says why.
    """
    bits = FORMAT_DEPTHS.get(pix_fmt or "")
    if bits is None:
        raise NvdecUnsupported(f"NVDEC decodes 4:2:0 video of 8, 10 or 12 bits here, not {pix_fmt}")
    # NVDEC's frames only leave it as 4:2:0 planes, which need even sizes
    if width % 2 or height % 2:
        raise NvdecUnsupported("NVDEC's frames travel as 4:2:0 planes here, which need an even "
                               f"size, not {width}x{height}")
    # PyNvVideoCodec gives no choice: its decoder deinterlaces (adaptive), libavcodec weaves
    if interlaced:
        raise NvdecUnsupported("interlaced video: NVDEC would deinterlace it, not deliver the "
                               "fields woven "
                               "as the CPU decoder does")
    reason = decoder_caps(device, codec, bits).refuses(width, height)
    if reason:
        raise NvdecUnsupported(reason)
    return bits


def decoder_table(device: int = 0) -> list[DecoderCaps]:
    """Every (codec, depth) NVDEC reports on ``device``, supported or not (empty without
    PyNvVideoCodec)."""
    try:
        nvdec_module()
    except NvdecUnsupported:
        return []
    rows = []
    for codec in CODECS:
        for bits in (8, 10, 12):
            try:
                rows.append(decoder_caps(device, codec, bits))
            except NvdecUnsupported:
                return rows
    return rows
