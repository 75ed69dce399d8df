"""What NVDEC is handed, read from the stream and its packets: the codec's name, the
bitstream filters and sequence headers it needs, the NAL units of Annex B packets (sequence
parameter sets, HEVC picture kinds) and packets copied without their discard flag."""

from __future__ import annotations

from typing import Iterator

import av

_ANNEX_B = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}
"""Bitstream filters that turn MP4/Matroska packets into the start-code form NVDEC parses."""


def _hevc_nal_type(header: int) -> int:
    """An HEVC NAL unit's type from its first header byte (below 32: a picture slice)."""
    return (header >> 1) & 0x3F


_SEQUENCE_NAL_TYPES = {"h264": (lambda header: header & 0x1F, {7}),  # SPS
                       "hevc": (_hevc_nal_type, {32, 33})}  # VPS, SPS


def _nal_units(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The NAL units of an Annex B packet, in order: (the header byte, the bytes from it to the
    next start code, trailing zero bytes included; empty where that start code follows at once).
    Start codes cannot occur inside a NAL unit (emulation prevention), so a scan for them is
    exact."""
    start = data.find(b"\x00\x00\x01")
    while 0 <= start < len(data) - 3:
        following = data.find(b"\x00\x00\x01", start + 3)
        yield data[start + 3], data[start + 3: following if following >= 0 else len(data)]
        start = following


def _first_picture_kind(data: bytes) -> int | None:
    """The NAL unit type of the first picture slice in an Annex B HEVC packet (None: no slice)."""
    kinds = (_hevc_nal_type(header) for header, _ in _nal_units(data))
    return next((kind for kind in kinds if kind < 32), None)  # below 32: a slice


def sequence_parameter_sets(data: bytes, codec: str) -> bytes:
    """The sequence parameter set NAL units (H.264's SPS, HEVC's VPS and SPS) of an Annex B
    packet, joined: a change in them is a change of size or depth (empty: none in the packet)."""
    nal_type, wanted = _SEQUENCE_NAL_TYPES[codec]
    return b"".join(unit.rstrip(b"\x00") for header, unit in _nal_units(data)
                    if nal_type(header) in wanted)


def _undiscarded(packet: av.Packet) -> av.Packet:
    """A copy of ``packet`` without its discard flag (same bytes and timing)."""
    copy = av.Packet(bytes(packet))
    copy.pts, copy.dts, copy.time_base = packet.pts, packet.dts, packet.time_base
    return copy


def codec_name(stream) -> str:
    """The codec of a PyAV video stream (``av1``), not the decoder libavcodec picked for it
    (``libdav1d``): what NVDEC is asked about."""
    codec = stream.codec_context.codec
    return getattr(codec, "canonical_name", None) or codec.name


def _sequence_header(stream) -> bytes:
    """What NVDEC needs before the first packet of a stream whose headers live in the container:
    AV1's configuration OBUs (after av1C's 4 bytes), MPEG-4 part 2's extradata."""
    extradata = bytes(stream.codec_context.extradata or b"")
    if codec_name(stream) == "av1":
        return extradata[4:] if len(extradata) > 4 and extradata[0] & 0x80 else extradata
    return extradata
