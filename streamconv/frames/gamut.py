"""Which samples of 4:2:0 planes the conversion to RGB clips, and so which come back exactly.

The frames the filters see are RGB of the frame's sample type (0..255, or 0..65535 for deeper
video). A YUV triplet outside the RGB cube (out of gamut: common in real video, near saturated
colours and sharp colour edges, where ringing and chroma subsampling push it out) is clipped to
the cube on the way in, and the clipped part is lost. Through the backend's fixed-point
conversion (:mod:`streamconv.frames.yuv`) an identity filter gives back:

- every luma sample whose pixel clips nothing, exactly;
- every chroma sample whose 2 x 2 pixels all clip nothing, exactly;
- the others moved towards the cube (by how much depends on how far out they were).

:func:`unclipped_pixels` says which pixels clip nothing, with the conversion's own integers.
"""

from __future__ import annotations

import numpy as np

from .yuv import YuvLayout


def unclipped_pixels(planes: np.ndarray, layout: YuvLayout) -> np.ndarray:
    """Where YUV -> RGB clips no channel: the fixed-point conversion of
    :func:`streamconv.frames.yuv.planes_to_rgb` without its clamp, compared with 0..RGB_MAX.

    Args:
        planes: (1.5 W H,) host array of ``layout.dtype`` (uint8 or uint16), I420 order.
        layout: the planes' size, matrix, range and depth.

    Returns:
        (H, W) bool host array, True where the pixel's triplet lies inside the RGB cube.
    """
    c = layout.coefficients
    shift = c["TO_RGB_BITS"]
    luma, u_plane, v_plane = (p.astype(np.int64) for p in layout.planes(planes))
    u = u_plane.repeat(2, 0).repeat(2, 1) - c["CMID"]  # each chroma sample covers 2 x 2 pixels
    v = v_plane.repeat(2, 0).repeat(2, 1) - c["CMID"]
    base = c["CY"] * (luma - c["Y0"]) + (1 << (shift - 1))
    inside = np.ones(luma.shape, bool)
    for term in (c["CRV"] * v, -(c["CGU"] * u + c["CGV"] * v), c["CBU"] * u):
        value = (base + term) >> shift
        inside &= (value >= 0) & (value <= c["RGB_MAX"])
    return inside


def unclipped_blocks(pixels: np.ndarray) -> np.ndarray:
    """(H, W) bool host array from :func:`unclipped_pixels` -> (H/2, W/2) bool: True where all
    four pixels a chroma sample covers clip nothing."""
    height, width = pixels.shape
    return pixels.reshape(height // 2, 2, width // 2, 2).all(axis=(1, 3))
