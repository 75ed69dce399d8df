"""Where a video frame's samples lie in a mapped GStreamer buffer, and their copy into a slot and
back: a packed frame as one (H, W, C) array, 4:2:0 planes into the flat I420 layout of a slot
(:class:`streamconv.frames.yuv.YuvLayout`) exactly as ``streamconv run`` fills its slots from a
decoder, NV12 and P010 split apart and shifted down on the way in, joined and shifted up on the
way out. Plain memory views and NumPy: nothing here needs GStreamer itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FrameFormatError
from .formats import PLANAR, SEMI_PLANAR, FrameFormat
from .seam import YuvLayout, split_semi_planar


@dataclass(frozen=True)
class FrameGeometry:
    """A frame's size and where its planes start in the buffer (GstVideoInfo's or GstVideoMeta's).

    Attributes:
        width, height: the frame's size in pixels.
        offsets: byte offset of each plane from the start of the mapped buffer.
        strides: bytes from one row of each plane to the next.
    """

    width: int
    height: int
    offsets: tuple[int, ...]
    strides: tuple[int, ...]


def _view(
    data: memoryview, dtype: np.dtype, offset: int, stride: int, shape: tuple[int, ...], what: str
) -> np.ndarray:
    """An array of ``shape`` (rows, samples[, channels]) over ``data`` from byte ``offset``, rows
    ``stride`` bytes apart (no copy; writable where ``data`` is).

    Raises:
        FrameFormatError: the buffer is too small for it, or a stride that does not hold a row.
    """
    item = dtype.itemsize
    inner = (shape[2] * item, item) if len(shape) == 3 else (item,)
    if stride < shape[1] * inner[0] or stride % item or offset % item:
        raise FrameFormatError(
            f"{what}: a row stride of {stride} bytes cannot hold {shape[1]} pixels"
        )
    try:
        return np.ndarray(shape, dtype, buffer=data, offset=offset, strides=(stride, *inner))
    except (TypeError, ValueError):
        raise FrameFormatError(
            f"{what}: a buffer of {data.nbytes} bytes is too small for "
            f"{shape[1]}x{shape[0]} samples from byte {offset} at a stride of {stride}"
        ) from None


def packed_frame(data: memoryview, fmt: FrameFormat, geometry: FrameGeometry) -> np.ndarray:
    """The (H, W, C) view of a packed frame in ``data`` (C = ``fmt.channels``), rows at the buffer's
    stride: what the filters read and write in place."""
    shape = (geometry.height, geometry.width, fmt.channels)
    return _view(
        data, fmt.dtype, geometry.offsets[0], geometry.strides[0], shape, f"{fmt.name} frame"
    )


def frame_planes(data: memoryview, fmt: FrameFormat, geometry: FrameGeometry) -> list[np.ndarray]:
    """Views of a 4:2:0 frame's planes in ``data``: Y (H, W), U and V (H/2, W/2) for PLANAR;
    Y (H, W) and the interleaved chroma (H/2, W) for SEMI_PLANAR."""
    height, width = geometry.height, geometry.width
    shapes = [(height, width)]
    if fmt.kind == PLANAR:
        shapes += [(height // 2, width // 2)] * 2
    else:
        shapes.append((height // 2, width))
    return [
        _view(data, fmt.dtype, offset, stride, shape, f"{fmt.name} plane {number}")
        for number, (offset, stride, shape) in enumerate(
            zip(geometry.offsets, geometry.strides, shapes)
        )
    ]


def read_frame(
    target: np.ndarray,
    data: memoryview,
    fmt: FrameFormat,
    geometry: FrameGeometry,
    layout: YuvLayout | None,
) -> None:
    """Copy the frame in ``data`` into a slot's input buffer ``target``: (H, W, C) of ``fmt.dtype``
    for a packed frame; for planes the flat (1.5 W H,) buffer of ``layout`` (of ``layout.dtype``),
    P010's samples shifted down to their 10 bits."""
    if layout is None:
        np.copyto(target, packed_frame(data, fmt, geometry))
        return
    planes = frame_planes(data, fmt, geometry)
    if fmt.kind == SEMI_PLANAR:
        split_semi_planar(target, planes[0], planes[1], layout, fmt.shift)
        return
    for source, slot_plane in zip(planes, layout.planes(target)):
        np.copyto(slot_plane, source)


def write_frame(
    data: memoryview,
    source: np.ndarray,
    fmt: FrameFormat,
    geometry: FrameGeometry,
    layout: YuvLayout | None,
) -> None:
    """Copy a slot's output buffer ``source`` (as :func:`read_frame`'s ``target``) into the frame
    in ``data`` (mapped writable), interleaving NV12/P010 chroma and shifting P010's samples up."""
    if layout is None:
        np.copyto(packed_frame(data, fmt, geometry), source)
        return
    planes = frame_planes(data, fmt, geometry)
    y_plane, u_plane, v_plane = layout.planes(source)
    if fmt.kind == PLANAR:
        for target, slot_plane in zip(planes, (y_plane, u_plane, v_plane)):
            np.copyto(target, slot_plane)
        return
    luma, chroma = planes
    for target, slot_plane in (
        (luma, y_plane),
        (chroma[:, 0::2], u_plane),
        (chroma[:, 1::2], v_plane),
    ):
        np.left_shift(slot_plane, fmt.shift, out=target)
