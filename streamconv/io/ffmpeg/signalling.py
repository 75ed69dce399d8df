"""Colour signalling an encoder writes into the bitstream only when told: HDR and the range flag.

HDR10 video carries the mastering display (its primaries, white point and luminance) and the
content light level (MaxCLL, MaxFALL) as side data. A decoded frame has them; PyAV can read them
but neither attach them to the frames it encodes nor to an output stream (its streams take only
the display matrix as coded side data), so they are written through the encoder's own options:
libx265 ``master-display``/``max-cll``, libx264 ``mastering-display``/``cll`` and SVT-AV1
``mastering-display``/``content-light``, which put them in the bitstream (HEVC/H.264 SEI, AV1
metadata OBUs) where decoders find them. Other encoders lose them, with a warning.

libx264 writes the range flag only beside other signal information: limited range with matrix,
primaries and transfer unspecified leaves the flag out, and readers then take the range as
unspecified. Naming the video format (component: YCbCr from RGB, as it is) makes it write it.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from fractions import Fraction

import av
from av.sidedata.sidedata import Type as SideData

from ...frames.colour import UNSPECIFIED, ColourTags

log = logging.getLogger(__name__)

LIMITED_RANGE = 1  # AVCOL_RANGE_MPEG
_PARAMS = {"libx265": "x265-params", "libx264": "x264-params", "libsvtav1": "svtav1-params"}
# Each encoder's keys for the mastering display and the content light level.
_KEYS = {"libx265": ("master-display", "max-cll"), "libx264": ("mastering-display", "cll"),
         "libsvtav1": ("mastering-display", "content-light")}


@dataclass(frozen=True)
class HdrMetadata:
    """A stream's HDR10 static metadata, as FFmpeg's side data gives it (None: not given).

    Attributes:
        primaries: the mastering display's red, green and blue (x, y) CIE 1931 chromaticities.
        white: its white point (x, y).
        luminance: its (min, max) luminance in cd/m².
        light_level: (MaxCLL, MaxFALL) in cd/m².
    """

    primaries: tuple[tuple[Fraction, Fraction], ...] | None = None
    white: tuple[Fraction, Fraction] | None = None
    luminance: tuple[Fraction, Fraction] | None = None
    light_level: tuple[int, int] | None = None

    @classmethod
    def of(cls, frame: av.VideoFrame) -> "HdrMetadata | None":
        """The mastering display and content light level a decoded frame carries (libavcodec's
        frame, host memory), or None where it carries neither."""
        display = frame.side_data.get(SideData.MASTERING_DISPLAY_METADATA)
        light = frame.side_data.get(SideData.CONTENT_LIGHT_LEVEL)
        found = {}
        if display is not None and len(bytes(display)) >= 88:
            # AVMasteringDisplayMetadata: 10 AVRationals (R, G, B, white x/y; min, max), 2 flags.
            *values, has_primaries, has_luminance = struct.unpack("<20i2i", bytes(display)[:88])
            ratios = [Fraction(n, d) if d else Fraction(0)
                      for n, d in zip(values[::2], values[1::2])]
            if has_primaries:
                found.update(primaries=tuple(zip(ratios[0:6:2], ratios[1:6:2])),
                             white=(ratios[6], ratios[7]))
            if has_luminance:
                found.update(luminance=(ratios[8], ratios[9]))
        if light is not None and len(bytes(light)) >= 8:
            # AVContentLightMetadata
            found.update(light_level=struct.unpack("<2I", bytes(light)[:8]))
        return cls(**found) if found else None

    def master_display(self, decimal: bool) -> str | None:
        """``G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min)``, in x265's units (0.00002 and 0.0001 cd/m²)
        or, ``decimal``, as SVT-AV1 takes it; None without both primaries and luminance."""
        if self.primaries is None or self.luminance is None:
            return None
        red, green, blue = self.primaries

        def point(xy):
            return f"{float(xy[0]):.5f},{float(xy[1]):.5f}" if decimal else \
                f"{round(xy[0] * 50000)},{round(xy[1] * 50000)}"
        low, high = self.luminance
        light = f"{float(high):.4f},{float(low):.4f}" if decimal else \
            f"{round(high * 10000)},{round(low * 10000)}"
        return f"G({point(green)})B({point(blue)})R({point(red)})WP({point(self.white)})L({light})"


def signalled_options(codec: str, options: dict[str, str], colour: ColourTags | None,
                      hdr: HdrMetadata | None, path) -> dict[str, str]:
    """The encoder ``options`` with what it needs to signal ``colour``'s range and ``hdr`` in
    the bitstream (its ``*-params``), keys the caller set kept. ``path`` names the output."""
    wanted = {}
    if codec == "libx264" and colour is not None and colour.range == LIMITED_RANGE and \
            (colour.space, colour.primaries, colour.trc) == (UNSPECIFIED,) * 3:
        wanted["videoformat"] = "component"
    if hdr is not None and codec in _KEYS:
        display_key, light_key = _KEYS[codec]
        display = hdr.master_display(decimal=codec == "libsvtav1")
        if display is not None:
            wanted[display_key] = display
        if hdr.light_level is not None:
            wanted[light_key] = "%d,%d" % hdr.light_level
    elif hdr is not None:
        log.warning("%s: the input's HDR mastering display and content light level are not "
                    "written: "
                    "%s is not told them (libx265, libx264 and libsvtav1 are)", path, codec)
    if not wanted:
        return options
    key = _PARAMS[codec]
    given = [item for item in options.get(key, "").split(":") if item]
    taken = {item.split("=", 1)[0] for item in given}
    added = [f"{name}={value}" for name, value in wanted.items() if name not in taken]
    return {**options, key: ":".join(given + added)} if added else options
