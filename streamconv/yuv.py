"""Planar YUV 4:2:0 frames: their layout in a slot, and the colour conversion every backend shares.

A decoder hands out yuv420p (1.5 bytes a pixel); the filters work on RGB (3 bytes a pixel).
Where source and sink both speak yuv420p, the slots carry the planes and the backend
converts: YUV -> RGB, the filter chain, RGB -> YUV. On the CUDA backend the conversion runs
on the GPU, so half the bytes cross PCIe and no host scaler pass is needed.

The conversion is defined here in 16-bit fixed point with integer arithmetic only, so the
CPU backend (NumPy) and the GPU kernels (``cuda/colour.cu``) give the same bytes:

- YUV -> RGB: each chroma sample serves its 2 x 2 block of pixels (nearest), then
  ``R = (CY (Y - Y0) + CRV (V - 128) + 2^15) >> 16`` and alike for G and B, clamped to 0..255.
- RGB -> YUV: ``Y = (YR R + YG G + YB B + (Y0 << 16) + 2^15) >> 16`` per pixel; U and V from
  the sums of R, G and B over each 2 x 2 block (the block's mean colour), with ``>> 18``.
- The coefficients follow the frame's matrix (BT.601, BT.709, BT.2020, ...) and range
  (limited: Y 16..235, chroma 16..240; full: 0..255). Rows of the RGB -> YUV matrix are
  rounded so that white stays white and greys keep U = V = 128 exactly.

A flat colour inside the RGB gamut comes back within 1 LSB of itself through an identity
filter (the RGB in between holds 8 bits).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .colour import FULL_RANGE, ColourTags

FIXED_BITS = 16
"""Fractional bits of the fixed-point coefficients."""

# (Kr, Kb) per FFmpeg AVColorSpace number; anything else reads as BT.601, FFmpeg's default.
_LUMA_WEIGHTS = {1: (0.2126, 0.0722), 4: (0.30, 0.11), 5: (0.299, 0.114), 6: (0.299, 0.114),
                 7: (0.212, 0.087), 9: (0.2627, 0.0593), 10: (0.2627, 0.0593)}
_BT601 = (0.299, 0.114)

PLANE_FORMATS = ("yuv420p", "yuvj420p")
"""Decoder formats whose planes go into a slot unchanged (8-bit 4:2:0; yuvj is full range)."""


@dataclass(frozen=True)
class YuvLayout:
    """Where the planes of one W x H yuv420p frame lie in a flat uint8 host buffer.

    The buffer holds Y (H x W), then U, then V (each H/2 x W/2), rows packed: the I420
    layout, ``size`` = 1.5 W H bytes. Width and height are even.

    Attributes:
        width, height: frame size in pixels.
        colour: the stream's matrix and range (and tags carried to the output).
        full_range: True for 0..255 video (yuvj420p or full-range tags).
    """

    width: int
    height: int
    colour: ColourTags = ColourTags()
    full_range: bool = False

    def __post_init__(self) -> None:
        if self.width < 2 or self.height < 2 or self.width % 2 or self.height % 2:
            raise ValueError(f"yuv420p planes need even sizes >= 2, got {self.width}x{self.height}")

    @classmethod
    def of_stream(cls, width: int, height: int, pix_fmt: str | None, colour: ColourTags) -> "YuvLayout | None":
        """The layout for frames of ``pix_fmt`` at width x height, or None if they cannot travel as
        planes (another format or bit depth, or an odd size: those go through RGB on the host)."""
        if pix_fmt not in PLANE_FORMATS or width % 2 or height % 2 or width < 2 or height < 2:
            return None
        full = pix_fmt == "yuvj420p" or colour.range == FULL_RANGE
        return cls(width, height, colour, full)

    @property
    def size(self) -> int:
        """Bytes of one frame's planes."""
        return self.width * self.height * 3 // 2

    @property
    def shape(self) -> tuple[int]:
        """Shape of a slot's host buffer: (1.5 W H,) uint8."""
        return (self.size,)

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(H, W, 3): the RGB frame the filters see."""
        return (self.height, self.width, 3)

    def planes(self, buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views of Y (H, W), U and V (H/2, W/2) inside a flat (1.5 W H,) uint8 buffer (no copy)."""
        if buffer.shape != self.shape or buffer.dtype != np.uint8:
            raise ValueError(f"unexpected planes buffer: {buffer.dtype}{buffer.shape} != uint8{self.shape}")
        luma = self.width * self.height
        quarter = luma // 4
        chroma = (self.height // 2, self.width // 2)
        return (buffer[:luma].reshape(self.height, self.width),
                buffer[luma:luma + quarter].reshape(chroma),
                buffer[luma + quarter:].reshape(chroma))

    @cached_property
    def coefficients(self) -> dict[str, int]:
        """The fixed-point conversion constants (see the module docstring), by kernel macro name."""
        return conversion_coefficients(self.colour.space, self.full_range)

    @property
    def kernel_defines(self) -> dict[str, int]:
        """The #defines of ``cuda/colour.cu`` for this matrix and range."""
        return {**self.coefficients, "FIXED_BITS": FIXED_BITS}

    def describe(self) -> str:
        """E.g. ``yuv420p bt709 limited``."""
        matrix = {1: "bt709", 9: "bt2020", 10: "bt2020"}.get(self.colour.space, "bt601")
        return f"yuv420p {matrix} {'full' if self.full_range else 'limited'}"


def conversion_coefficients(space: int, full_range: bool) -> dict[str, int]:
    """Integer constants of the YUV <-> RGB conversion for AVColorSpace ``space`` and the range.

    Returns:
        ``Y0`` (black's Y), ``CY``, ``CRV``, ``CGU``, ``CGV``, ``CBU`` (YUV -> RGB, scaled by 2^16)
        and ``YR``..``VB`` (RGB -> YUV, scaled by 2^16).
    """
    kr, kb = _LUMA_WEIGHTS.get(space, _BT601)
    kg = 1.0 - kr - kb
    y0, y_span, c_span = (0, 255, 255) if full_range else (16, 219, 224)
    one = 1 << FIXED_BITS
    luma = 255 / y_span  # code value -> 0..255
    chroma = 255 / c_span
    to_rgb = {
        "CY": round(one * luma),
        "CRV": round(one * 2 * (1 - kr) * chroma),
        "CGU": round(one * 2 * (1 - kb) * kb / kg * chroma),
        "CGV": round(one * 2 * (1 - kr) * kr / kg * chroma),
        "CBU": round(one * 2 * (1 - kb) * chroma),
    }
    y_scale, c_scale = y_span / 255, c_span / 255
    yr, yb = round(one * kr * y_scale), round(one * kb * y_scale)
    ur, ub = round(-one * kr / (2 * (1 - kb)) * c_scale), round(one * 0.5 * c_scale)
    vr, vb = ub, round(-one * kb / (2 * (1 - kr)) * c_scale)
    to_yuv = {
        "YR": yr, "YG": round(one * y_scale) - yr - yb, "YB": yb,  # white -> Y0 + y_span exactly
        "UR": ur, "UG": -ur - ub, "UB": ub,  # grey -> 128 exactly
        "VR": vr, "VG": -vr - vb, "VB": vb,
    }
    return {"Y0": y0, **to_rgb, **to_yuv}


def yuv_to_rgb(rgb: np.ndarray, planes: np.ndarray, layout: YuvLayout) -> None:
    """Convert a frame's planes to RGB: ``planes`` (1.5 W H,) uint8 -> ``rgb`` (H, W, 3) uint8, host."""
    planes_to_rgb(rgb, *layout.planes(planes), layout.coefficients)


def rgb_to_yuv(planes: np.ndarray, rgb: np.ndarray, layout: YuvLayout) -> None:
    """Convert RGB to a frame's planes: ``rgb`` (H, W, 3) uint8 -> ``planes`` (1.5 W H,) uint8, host."""
    rgb_to_planes(*layout.planes(planes), rgb, layout.coefficients)


def planes_to_rgb(rgb: np.ndarray, luma: np.ndarray, u_plane: np.ndarray, v_plane: np.ndarray,
                  c: dict[str, int]) -> None:
    """YUV -> RGB on host arrays: ``luma`` (h, w), ``u_plane``, ``v_plane`` (h/2, w/2) uint8 ->
    ``rgb`` (h, w, 3) uint8, with the constants ``c`` of :func:`conversion_coefficients`.

    Any band of an even number of rows converts alone (the CPU backend splits frames so).
    """
    height, width = luma.shape
    u = u_plane.astype(np.int32)
    u -= 128
    v = v_plane.astype(np.int32)
    v -= 128
    y = luma.astype(np.int32)
    y -= c["Y0"]
    y *= c["CY"]
    y += 1 << (FIXED_BITS - 1)
    pairs = y.reshape(height // 2, 2, width)  # the two luma rows that share a chroma row
    red, green, blue = c["CRV"] * v, -(c["CGU"] * u + c["CGV"] * v), c["CBU"] * u
    value = np.empty_like(pairs)
    for channel, term in enumerate((red, green, blue)):
        # Each chroma sample covers a 2 x 2 block: repeat it along the row, broadcast over the pair.
        np.add(pairs, np.repeat(term, 2, axis=1)[:, None, :], out=value)
        value >>= FIXED_BITS
        np.clip(value, 0, 255, out=value)
        rgb[..., channel] = value.reshape(height, width)


def rgb_to_planes(luma: np.ndarray, u_plane: np.ndarray, v_plane: np.ndarray, rgb: np.ndarray,
                  c: dict[str, int]) -> None:
    """RGB -> YUV on host arrays: ``rgb`` (h, w, 3) uint8 -> ``luma`` (h, w), ``u_plane``,
    ``v_plane`` (h/2, w/2) uint8, with the constants ``c`` of :func:`conversion_coefficients`.

    Any band of an even number of rows converts alone.
    """
    height, width = luma.shape
    wide = rgb.astype(np.int32)
    y = wide @ np.array([c["YR"], c["YG"], c["YB"]], np.int32)
    y += (c["Y0"] << FIXED_BITS) + (1 << (FIXED_BITS - 1))
    y >>= FIXED_BITS
    np.clip(y, 0, 255, out=y)
    luma[...] = y
    # Sums of each 2 x 2 block (0..1020 per channel): the row pair first, then the column pair.
    rows = wide.reshape(height // 2, 2, width * 3)
    pair = rows[:, 0] + rows[:, 1]
    columns = pair.reshape(height // 2, width // 2, 2, 3)
    sums = columns[:, :, 0] + columns[:, :, 1]
    weights = np.array([[c["UR"], c["VR"]], [c["UG"], c["VG"]], [c["UB"], c["VB"]]], np.int32)
    chroma = sums @ weights  # (h/2, w/2, 2): U and V
    chroma += (128 << (FIXED_BITS + 2)) + (1 << (FIXED_BITS + 1))
    chroma >>= FIXED_BITS + 2
    np.clip(chroma, 0, 255, out=chroma)
    u_plane[...] = chroma[..., 0]
    v_plane[...] = chroma[..., 1]
