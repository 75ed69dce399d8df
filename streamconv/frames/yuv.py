"""Planar YUV 4:2:0 frames: their layout in a slot, and the colour conversion every backend shares.

A decoder hands out yuv420p (1.5 bytes a pixel); the filters work on RGB (3 bytes a pixel).
Where source and sink both speak yuv420p, the slots carry the planes and the backend
converts: YUV -> RGB, the filter chain, RGB -> YUV. On the CUDA backend the conversion runs
on the GPU, so half the bytes cross PCIe and no host scaler pass is needed.

The conversion is defined here in 16-bit fixed point with integer arithmetic only, so the
CPU backend (NumPy) and the GPU kernels (``cuda/frames/colour.cu``) give the same bytes:

- YUV -> RGB: each chroma sample serves its 2 x 2 block of pixels (nearest), then
  ``R = (CY (Y - Y0) + CRV (V - 128) + 2^15) >> 16`` and alike for G and B, clamped to 0..255.
- RGB -> YUV: ``Y = (YR R + YG G + YB B + (Y0 << 16) + 2^15) >> 16`` per pixel; U and V from
  the sums of R, G and B over each 2 x 2 block (the block's mean colour), with ``>> 18``.
- The coefficients follow the frame's matrix (BT.601, BT.709, BT.2020, ...) and range
  (limited: Y 16..235, chroma 16..240; full: 0..255). Rows of the RGB -> YUV matrix are
  rounded so that white stays white and greys keep U = V = 128 exactly.

Every sample whose pixel lies inside the RGB gamut (a chroma sample: all four of its pixels)
comes back exactly through an identity filter; one outside it is clipped to the RGB cube on
the way in (see :mod:`streamconv.frames.gamut`).

The planes enter a slot from a decoded PyAV frame (:func:`frame_to_planes`) and leave it as a
frame to encode (:func:`planes_to_frame`), copied row by row: no scaler pass either way.

Deeper video (yuv420p10le and yuv420p12le: 10- and 12-bit samples in uint16) converts to and
from 16-bit RGB (uint16, 0..65535) by the same formulas, with the code values scaled to the
depth (limited range: Y 64..940, chroma 64..960 at 10 bits; chroma centred on 512), 12
fractional bits towards RGB and, towards YUV, 19 at 10 bits (every product and sum fits in
32 bits) and 21 at 12 bits (sums in 64 bits). The 16-bit RGB in between is finer than the
code values, so every colour inside the gamut comes back exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import cv2  # (before av: see streamconv.io.display.check_import_order)
import av
import numpy as np

from .colour import FULL_RANGE, ColourTags, convert, plane_rows

SOURCES = {"colour": "sm_75"}
"""The conversions' kernel files in cuda/frames/ -> the oldest architecture each runs on."""
FIXED_BITS = 16
"""Fractional bits of the fixed-point coefficients."""

# (Kr, Kb) per FFmpeg AVColorSpace number; anything else reads as BT.601, FFmpeg's default.
_LUMA_WEIGHTS = {1: (0.2126, 0.0722), 4: (0.30, 0.11), 5: (0.299, 0.114), 6: (0.299, 0.114),
                 7: (0.212, 0.087), 9: (0.2627, 0.0593), 10: (0.2627, 0.0593)}
_BT601 = (0.299, 0.114)

PLANE_FORMATS = ("yuv420p", "yuvj420p")
"""Decoder formats whose planes go into a slot unchanged (8-bit 4:2:0; yuvj is full range)."""

DEEP_PLANE_FORMATS = {"yuv420p10le": 10, "yuv420p12le": 12}
"""Deeper 4:2:0 formats whose planes go into a slot unchanged (uint16 samples), by bit depth."""

SEMI_PLANAR_FORMATS = {"nv12": (8, 0), "p010le": (10, 6)}
"""4:2:0 formats with U and V interleaved in one plane (what hardware decoders give), as
(bit depth, shift): they go into a slot as yuv420p or yuv420p10le, the chroma split apart and
each sample shifted down (p010's 10 bits are the high bits of each 16)."""

DEEP_TO_RGB_BITS = 12
"""Fractional bits of the YUV -> RGB coefficients for deep video (2^16 would overflow 32 bits)."""

DEEP_TO_YUV_BITS = 19
"""Fractional bits of the RGB -> YUV coefficients for 10-bit video, one more per further bit of
depth: enough that coefficient rounding moves a code value by at most 1/16. At 10 bits a 2 x 2
chroma sum still fits in 32 bits; from :data:`WIDE_TO_YUV_BITS` on, the sums take 64."""

WIDE_TO_YUV_BITS = DEEP_TO_YUV_BITS + 1
"""From this many fractional bits on, RGB -> YUV sums need 64-bit integers (CPU and GPU alike)."""


def planes_format(bits: int) -> str:
    """The FFmpeg pixel format of 4:2:0 planes of ``bits`` per sample (yuv420p, yuv420p10le,
    ...)."""
    if bits == 8:
        return "yuv420p"
    return next(name for name, depth in DEEP_PLANE_FORMATS.items() if depth == bits)


@dataclass(frozen=True)
class YuvLayout:
    """Where the planes of one W x H 4:2:0 frame lie in a flat host buffer.

    The buffer holds Y (H x W), then U, then V (each H/2 x W/2), rows packed: the I420
    layout, ``size`` = 1.5 W H samples, uint8 for 8-bit video (yuv420p), uint16 for deeper
    (yuv420p10le, yuv420p12le). Width and height are even.

    Attributes:
        width, height: frame size in pixels.
        colour: the stream's matrix and range (and tags carried to the output).
        full_range: True for full-range video (yuvj420p or full-range tags).
        bits: bits per sample (8, or 10 or 12 for yuv420p10le or yuv420p12le); the RGB frames
            are 8-bit for 8, 16-bit (0..65535) for more.
    """

    width: int
    height: int
    colour: ColourTags = ColourTags()
    full_range: bool = False
    bits: int = 8

    def __post_init__(self) -> None:
        if self.width < 2 or self.height < 2 or self.width % 2 or self.height % 2:
            raise ValueError(f"4:2:0 planes need even sizes >= 2, got {self.width}x{self.height}")
        if self.bits != 8 and self.bits not in DEEP_PLANE_FORMATS.values():
            raise ValueError(f"planes of {self.bits} bits per sample are not supported")

    @classmethod
    def of_stream(cls, width: int, height: int, pix_fmt: str | None,
                  colour: ColourTags) -> "YuvLayout | None":
        """The layout for frames of ``pix_fmt`` at width x height, or None if they cannot travel as
        planes (another format or bit depth, or an odd size: those go through RGB on the host)."""
        if pix_fmt in SEMI_PLANAR_FORMATS:
            bits = SEMI_PLANAR_FORMATS[pix_fmt][0]
        elif pix_fmt in PLANE_FORMATS or pix_fmt in DEEP_PLANE_FORMATS:
            bits = DEEP_PLANE_FORMATS.get(pix_fmt, 8)
        else:
            return None
        if width % 2 or height % 2 or width < 2 or height < 2:
            return None
        full = pix_fmt == "yuvj420p" or colour.range == FULL_RANGE
        return cls(width, height, colour, full, bits)

    @property
    def pix_fmt(self) -> str:
        """The FFmpeg pixel format of these planes (yuv420p for 8 bits; yuvj420p reads the same)."""
        return planes_format(self.bits)

    @property
    def dtype(self) -> np.dtype:
        """The samples' type: uint8 for 8 bits, uint16 for more."""
        return np.dtype(np.uint8 if self.bits == 8 else np.uint16)

    @property
    def frame_dtype(self) -> np.dtype:
        """The RGB frames' type: uint8 for 8-bit video, uint16 (0..65535) for deeper."""
        return self.dtype

    @property
    def size(self) -> int:
        """Samples of one frame's planes."""
        return self.width * self.height * 3 // 2

    @property
    def nbytes(self) -> int:
        """Bytes of one frame's planes."""
        return self.size * self.dtype.itemsize

    @property
    def shape(self) -> tuple[int]:
        """Shape of a slot's host buffer: (1.5 W H,) of ``dtype``."""
        return (self.size,)

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(H, W, 3): the RGB frame the filters see."""
        return (self.height, self.width, 3)

    def planes(self, buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views of Y (H, W), U and V (H/2, W/2) inside a flat (1.5 W H,) buffer of ``dtype``
        (no copy)."""
        if buffer.shape != self.shape or buffer.dtype != self.dtype:
            raise ValueError(f"unexpected planes buffer: {buffer.dtype}{buffer.shape} != "
                             f"{self.dtype}{self.shape}")
        luma = self.width * self.height
        quarter = luma // 4
        chroma = (self.height // 2, self.width // 2)
        return (buffer[:luma].reshape(self.height, self.width),
                buffer[luma:luma + quarter].reshape(chroma),
                buffer[luma + quarter:].reshape(chroma))

    @cached_property
    def coefficients(self) -> dict[str, int]:
        """The fixed-point conversion constants (see the module docstring), by kernel macro name."""
        return conversion_coefficients(self.colour.space, self.full_range, self.bits)

    @property
    def kernel_defines(self) -> dict[str, int]:
        """The #defines of ``cuda/frames/colour.cu`` for this matrix, range and depth."""
        return {**self.coefficients, "SAMPLE_BYTES": self.dtype.itemsize}

    def describe(self) -> str:
        """E.g. ``yuv420p bt709 limited``."""
        matrix = {1: "bt709", 9: "bt2020", 10: "bt2020"}.get(self.colour.space, "bt601")
        return f"{self.pix_fmt} {matrix} {'full' if self.full_range else 'limited'}"


def conversion_coefficients(space: int, full_range: bool, bits: int = 8) -> dict[str, int]:
    """Integer constants of the YUV <-> RGB conversion for AVColorSpace ``space``, the range and
    the bits per sample (8: RGB 0..255; deeper: RGB 0..65535).

    Returns:
        ``Y0`` (black's Y), ``CMID`` (zero chroma), ``CODE_MAX`` (largest code value),
        ``RGB_MAX``, ``TO_RGB_BITS``, ``TO_YUV_BITS``, ``YUV_SUM_BITS`` (32, or 64 where the
        RGB -> YUV sums need it); ``CY``, ``CRV``, ``CGU``, ``CGV``, ``CBU``
        (YUV -> RGB, scaled by 2^TO_RGB_BITS) and ``YR``..``VB`` (RGB -> YUV, scaled by
        2^TO_YUV_BITS). For 8 bits both scales are 2^16.
    """
    kr, kb = _LUMA_WEIGHTS.get(space, _BT601)
    kg = 1.0 - kr - kb
    scale = 1 << (bits - 8)
    code_max = (1 << bits) - 1
    y0, y_span, c_span = (0, code_max, code_max) if full_range else (16 * scale, 219 * scale,
                                                                     224 * scale)
    rgb_max = 255 if bits == 8 else 65535
    to_rgb_bits = FIXED_BITS if bits == 8 else DEEP_TO_RGB_BITS
    one = 1 << to_rgb_bits
    luma = rgb_max / y_span  # code value -> 0..RGB_MAX
    chroma = rgb_max / c_span
    to_rgb = {
        "CY": round(one * luma),
        "CRV": round(one * 2 * (1 - kr) * chroma),
        "CGU": round(one * 2 * (1 - kb) * kb / kg * chroma),
        "CGV": round(one * 2 * (1 - kr) * kr / kg * chroma),
        "CBU": round(one * 2 * (1 - kb) * chroma),
    }
    to_yuv_bits = FIXED_BITS if bits == 8 else DEEP_TO_YUV_BITS + (bits - 10)
    one = 1 << to_yuv_bits
    y_scale, c_scale = y_span / rgb_max, c_span / rgb_max
    yr, yb = round(one * kr * y_scale), round(one * kb * y_scale)
    ur, ub = round(-one * kr / (2 * (1 - kb)) * c_scale), round(one * 0.5 * c_scale)
    vr, vb = ub, round(-one * kb / (2 * (1 - kr)) * c_scale)
    to_yuv = {
        "YR": yr, "YG": round(one * y_scale) - yr - yb, "YB": yb,  # white -> Y0 + y_span exactly
        "UR": ur, "UG": -ur - ub, "UB": ub,  # grey -> 128 exactly
        "VR": vr, "VG": -vr - vb, "VB": vb,
    }
    limits = {"Y0": y0, "CMID": 1 << (bits - 1), "CODE_MAX": code_max, "RGB_MAX": rgb_max,
              "TO_RGB_BITS": to_rgb_bits, "TO_YUV_BITS": to_yuv_bits,
              "YUV_SUM_BITS": 64 if to_yuv_bits >= WIDE_TO_YUV_BITS else 32}
    return {**limits, **to_rgb, **to_yuv}


def split_semi_planar(buffer: np.ndarray, luma: np.ndarray, chroma: np.ndarray, layout: YuvLayout,
                      shift: int = 0) -> None:
    """Write a semi-planar frame (nv12, p010le) into a flat slot buffer laid out as ``layout``.

    Args:
        buffer: (1.5 W H,) host array of ``layout.dtype``, written in full.
        luma: (H, >= W) host array of the same dtype, Y rows as decoded (rows may be padded).
        chroma: (H/2, >= W) host array of the same dtype, U and V interleaved per pixel pair.
        layout: the slot layout (yuv420p or yuv420p10le, W x H).
        shift: bits to shift each sample down (6 for p010le, 0 for nv12).
    """
    y_plane, u_plane, v_plane = layout.planes(buffer)
    width = layout.width
    pairs = chroma[:, :width]
    for target, source in ((y_plane, luma[:, :width]), (u_plane, pairs[:, 0::2]),
                           (v_plane, pairs[:, 1::2])):
        if shift:
            np.right_shift(source, shift, out=target)
        else:
            np.copyto(target, source)


def frame_to_planes(buffer: np.ndarray, frame: av.VideoFrame, layout: YuvLayout) -> None:
    """Copy a decoded 4:2:0 frame's planes into a flat (1.5 W H,) host buffer laid out as
    ``layout``.

    Decoder rows may be padded; nv12 and p010le chroma is split apart (:func:`split_semi_planar`);
    a frame of another 4:2:0 format than the layout's (the decoder changed format mid-stream)
    is converted to ``layout.pix_fmt`` first.
    """
    name = frame.format.name
    bits, shift = SEMI_PLANAR_FORMATS.get(name, (None, 0))
    if bits == layout.bits:
        luma, chroma = frame.planes
        split_semi_planar(buffer, plane_rows(luma, layout.dtype, layout.height),
                          plane_rows(chroma, layout.dtype, layout.height // 2), layout, shift)
        return
    same = name in PLANE_FORMATS if layout.bits == 8 else name == layout.pix_fmt
    if not same:
        frame = convert(frame, format=layout.pix_fmt)
    for plane, target in zip(frame.planes, layout.planes(buffer)):
        np.copyto(target, plane_rows(plane, layout.dtype, target.shape[0])[:, : target.shape[1]])


def planes_to_frame(planes: np.ndarray, layout: YuvLayout, pix_fmt: str,
                    colour: ColourTags | None) -> av.VideoFrame:
    """A new frame of ``pix_fmt`` (the layout's format, or yuvj420p) holding a copy of a flat
    (1.5 W H,) planes host buffer laid out as ``layout`` (a slot is reused at once, and an encoder
    may keep the frame a while), tagged with ``colour``'s matrix and range (None: untagged)."""
    video = av.VideoFrame(layout.width, layout.height, pix_fmt)
    for plane, source in zip(video.planes, layout.planes(planes)):
        np.copyto(plane_rows(plane, source.dtype, source.shape[0])[:, : source.shape[1]], source)
    if colour is not None:
        video.colorspace, video.color_range = colour.space, colour.range
    return video


def yuv_to_rgb(rgb: np.ndarray, planes: np.ndarray, layout: YuvLayout) -> None:
    """Convert a frame's planes to RGB: ``planes`` (1.5 W H,) -> ``rgb`` (H, W, 3), host arrays of
    the layout's ``dtype`` and ``frame_dtype``."""
    planes_to_rgb(rgb, *layout.planes(planes), layout.coefficients)


def rgb_to_yuv(planes: np.ndarray, rgb: np.ndarray, layout: YuvLayout) -> None:
    """Convert RGB to a frame's planes: ``rgb`` (H, W, 3) -> ``planes`` (1.5 W H,), host arrays of
    the layout's ``frame_dtype`` and ``dtype``."""
    rgb_to_planes(*layout.planes(planes), rgb, layout.coefficients)


@lru_cache(maxsize=64)
def _code_table(scale: int, offset: int) -> np.ndarray:
    """scale * code + offset for the 256 codes of 8-bit video: (256,) int32 host array."""
    return (np.arange(256, dtype=np.int64) * scale + offset).astype(np.int32)


def _affine(codes: np.ndarray, scale: int, offset: int, integer=np.int32) -> np.ndarray:
    """scale * codes + offset as a new array of ``integer``: (h, w) uint8 codes through a table
    (``cv2.LUT``, one pass), uint16 codes by NumPy arithmetic (exact either way)."""
    if codes.dtype == np.uint8 and integer == np.int32:
        return cv2.LUT(codes, _code_table(scale, offset))
    out = np.multiply(codes, scale, dtype=integer)
    out += offset
    return out


def planes_to_rgb(rgb: np.ndarray, luma: np.ndarray, u_plane: np.ndarray, v_plane: np.ndarray,
                  c: dict[str, int]) -> None:
    """YUV -> RGB on host arrays: ``luma`` (h, w), ``u_plane``, ``v_plane`` (h/2, w/2) uint8 or
    uint16 code values -> ``rgb`` (h, w, 3) uint8 or uint16, with the constants ``c`` of
    :func:`conversion_coefficients`.

    Any band of an even number of rows converts alone (the CPU backend splits frames so).
    """
    height, width = luma.shape
    shift, mid = c["TO_RGB_BITS"], c["CMID"]
    base = _affine(luma, c["CY"], (1 << (shift - 1)) - c["CY"] * c["Y0"])
    green = _affine(u_plane, -c["CGU"], c["CGU"] * mid)
    green += _affine(v_plane, -c["CGV"], c["CGV"] * mid)
    terms = (_affine(v_plane, c["CRV"], -c["CRV"] * mid), green,
             _affine(u_plane, c["CBU"], -c["CBU"] * mid))
    pairs = base.reshape(height // 2, 2, width)  # the two luma rows that share a chroma row
    value = np.empty_like(pairs)
    channels = []
    for term in terms:
        # Each chroma sample covers a 2 x 2 block: repeat it along the row, broadcast over the pair.
        np.add(pairs, np.repeat(term, 2, axis=1)[:, None, :], out=value)
        value >>= shift
        channels.append(np.empty((height, width), rgb.dtype))
        _clip_into(channels[-1], value.reshape(height, width), c["RGB_MAX"])
    merged = cv2.merge(channels, dst=rgb)
    if merged is not rgb:  # a view OpenCV cannot write into
        np.copyto(rgb, merged.reshape(rgb.shape))


def _clip_into(target: np.ndarray, value: np.ndarray, maximum: int) -> None:
    """target = clip(value, 0, maximum) for integer host arrays of one shape (value is
    overwritten). Into 8-bit samples (0..255) through cv2.convertScaleAbs, |x| saturated, exact
    for x >= 0: OpenCV's arithmetic with a scalar (cv2.add(x, 0, dtype=...)) can leave its
    worker threads spinning after each call (on an idle machine)."""
    if target.dtype == np.uint8 and maximum == 255 and value.dtype == np.int32:
        np.maximum(value, 0, out=value)
        result = cv2.convertScaleAbs(value, dst=target)
        if result is not target:
            np.copyto(target, result)
        return
    np.clip(value, 0, maximum, out=value)
    np.copyto(target, value, casting="unsafe")


def rgb_to_planes(luma: np.ndarray, u_plane: np.ndarray, v_plane: np.ndarray, rgb: np.ndarray,
                  c: dict[str, int]) -> None:
    """RGB -> YUV on host arrays: ``rgb`` (h, w, 3) uint8 or uint16 -> ``luma`` (h, w),
    ``u_plane``, ``v_plane`` (h/2, w/2) code values of the planes' dtype, with the constants
    ``c`` of :func:`conversion_coefficients`.

    Any band of an even number of rows converts alone.
    """
    shift = c["TO_YUV_BITS"]
    integer = np.int64 if c["YUV_SUM_BITS"] == 64 else np.int32
    if rgb.dtype == np.uint8 and rgb.flags.c_contiguous:
        red, green, blue = cv2.split(rgb)  # contiguous planes, for cv2.LUT
    else:
        red, green, blue = (rgb[..., k] for k in range(3))
    # Integer sums are exact in any order.
    y = _affine(red, c["YR"], (c["Y0"] << shift) + (1 << (shift - 1)), integer)
    y += _affine(green, c["YG"], 0, integer)
    y += _affine(blue, c["YB"], 0, integer)
    y >>= shift
    _clip_into(luma, y, c["CODE_MAX"])
    # Sums of each 2 x 2 block (0..4 RGB_MAX per channel): the row pair first, then the column pair.
    sums = []
    for plane in (red, green, blue):
        pair = np.add(plane[0::2], plane[1::2], dtype=integer)
        sums.append(np.add(pair[:, 0::2], pair[:, 1::2]))
    work = np.empty_like(sums[0])
    for target, names in ((u_plane, ("UR", "UG", "UB")), (v_plane, ("VR", "VG", "VB"))):
        chroma = np.multiply(sums[0], c[names[0]])
        chroma += np.multiply(sums[1], c[names[1]], out=work)
        chroma += np.multiply(sums[2], c[names[2]], out=work)
        # Zero chroma is added after the shift (the same value, since it is a whole multiple of
        # 2^(shift + 2)), so the sum before it stays within 32 bits at 10 bits (64 are used above).
        chroma += 1 << (shift + 1)
        chroma >>= shift + 2
        chroma += c["CMID"]
        _clip_into(target, chroma, c["CODE_MAX"])
