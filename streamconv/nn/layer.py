"""A convolution layer over video frames: the ``bank`` filter (``--filter
bank:file=W.npy[,relu=1,pool=2]``).

Each frame (H x W x C uint8, values 0..255 as floats) goes through conv2d with the M x C x K x K
weights (zero padding K // 2, stride 1, so the maps are H x W), then ReLU and max-pooling if
asked, and the M maps are shown in a frame of the input's size, rounded half to even and
saturated to 0..255:

- M = 1: the map in grey (every channel);
- M = C (3 on RGB): map c in channel c, a colour mix;
- other M: a mosaic, ceil(sqrt(M)) cells across, each map in grey in its cell, read nearest;
  pixels of no cell are black.

Pooled maps (H // pool x W // pool) are read nearest too, so the frame size never changes and
the rest of the pipeline (ring buffers, encoder) is untouched.

This module reads and checks the layer (:func:`load_layer`) and runs it on the CPU
(:func:`layer_cpu`); :mod:`streamconv.nn.gpu_layer` runs it on the GPU, ``maps_to_frame`` in
``cuda/nn/nn_ops.cu`` composing the frame as :func:`compose_frame` does here. The public filter name
``bank`` is kept for the command line; inside streamconv, "bank" means only two tap matrices
combined per pixel in one filter stage (``edge``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FilterSpecError, FrameFormatError, FrameTypeError
from ..files.tapfiles import MAX_ABS_TAP, load_npy
from .cpu import conv2d_cpu, max_pool2d_cpu
from .shapes import MAX_KERNEL, conv2d_shape

MAX_MAPS = 256
"""Most output maps a layer may have."""

MAX_LAYER_FILE_BYTES = 16 << 20
"""A weights file larger than this is refused: at most one byte more is ever read."""


@dataclass(frozen=True)
class ConvLayer:
    """A convolution layer of M output maps over C input channels: weights M x C x K x K float32
    (host, read-only), then ReLU if ``relu``, then max-pooling over ``pool`` x ``pool`` windows."""

    weights: np.ndarray
    relu: bool = False
    pool: int = 1

    @property
    def maps(self) -> int:
        return int(self.weights.shape[0])

    @property
    def channels(self) -> int:
        return int(self.weights.shape[1])

    @property
    def size(self) -> int:
        return int(self.weights.shape[2])


@dataclass(frozen=True)
class Mosaic:
    """Where the maps go in the frame: ``cols`` cells across, each ``cell_h`` x ``cell_w``;
    ``colour``: map c fills channel c of a single cell."""

    cols: int
    cell_h: int
    cell_w: int
    colour: bool


def load_layer(path: str | Path, *, relu: bool = False, pool: int = 1) -> ConvLayer:
    """Read M x C x K x K weights from a .npy file and check them. Messages start with ``bank:``,
    the filter's public name.

    Raises:
        FilterSpecError: missing or oversized file, not 4-D, K even or over 31, M over 256,
            non-finite or huge values, or pool < 1.
    """
    array = load_npy(Path(path), what="bank: weights file", max_bytes=MAX_LAYER_FILE_BYTES)
    if array.ndim != 4 or array.shape[2] != array.shape[3] or min(array.shape) < 1:
        raise FilterSpecError(f"bank: weights have shape {array.shape}, expected (M, C, K, K)")
    maps, _, k, _ = array.shape
    if k % 2 == 0 or k > MAX_KERNEL:
        raise FilterSpecError(f"bank: K = {k}; it must be odd and at most {MAX_KERNEL} (maps keep "
                              "the frame size)")
    if maps > MAX_MAPS:
        raise FilterSpecError(f"bank: {maps} maps; at most {MAX_MAPS}")
    if not np.all(np.isfinite(array)):
        raise FilterSpecError("bank: weights contain NaN or infinity")
    if np.abs(array).max() > MAX_ABS_TAP:
        raise FilterSpecError(f"bank: |weight| = {np.abs(array).max():g} exceeds {MAX_ABS_TAP:g}")
    if pool < 1:
        raise FilterSpecError(f"bank: pool must be >= 1, got {pool}")
    result = np.ascontiguousarray(array, np.float32)
    result.setflags(write=False)
    return ConvLayer(result, relu=relu, pool=pool)


def check_frame(layer: ConvLayer, shape: tuple[int, int, int]) -> tuple[int, int]:
    """The map size (Hm, Wm) for (H, W, C) frames.

    Raises:
        FrameFormatError: C differs from the weights' C, or the frame is smaller than the pool.
    """
    height, width, channels = shape
    if channels != layer.channels:
        raise FrameFormatError(f"bank: frames have {channels} channels, the weights expect "
                               f"{layer.channels} "
                               f"(weights {tuple(layer.weights.shape)})")
    if height < layer.pool or width < layer.pool:
        raise FrameFormatError(f"bank: frame {width}x{height} is smaller than pool={layer.pool}")
    return height // layer.pool, width // layer.pool


def mosaic(maps: int, shape: tuple[int, int, int]) -> Mosaic:
    """How ``maps`` maps fill an (H, W, C) frame (see the module docstring)."""
    height, width, channels = shape
    if maps == 1 or maps == channels:
        return Mosaic(1, height, width, colour=maps == channels and channels > 1)
    cols = math.ceil(math.sqrt(maps))
    rows = math.ceil(maps / cols)
    return Mosaic(cols, max(1, height // rows), max(1, width // cols), colour=False)


def compose_frame(maps: np.ndarray, shape: tuple[int, int, int], layout: Mosaic) -> np.ndarray:
    """M x Hm x Wm float32 maps (host) -> an (H, W, C) uint8 frame, as maps_to_frame in
    nn_ops.cu."""
    height, width, channels = shape
    count, map_h, map_w = maps.shape
    rows_index, cols_index = np.arange(height), np.arange(width)
    r, q = rows_index // layout.cell_h, cols_index // layout.cell_w
    sy = (rows_index - r * layout.cell_h) * map_h // layout.cell_h
    sx = (cols_index - q * layout.cell_w) * map_w // layout.cell_w
    if layout.colour:
        planes = np.clip(np.rint(maps[:, sy[:, None], sx[None, :]]), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(planes.transpose(1, 2, 0))
    which = r[:, None] * layout.cols + q[None, :]
    shown = (q[None, :] < layout.cols) & (which < count)
    frame = np.clip(np.rint(maps[np.where(shown, which, 0), sy[:, None], sx[None, :]]), 0,
                    255).astype(np.uint8)
    frame[~shown] = 0
    return np.repeat(frame[:, :, None], channels, axis=2)


def layer_cpu(frame: np.ndarray, layer: ConvLayer) -> np.ndarray:
    """One frame through the layer on the CPU: (H, W, C) uint8 host -> (H, W, C) uint8 host."""
    check_frame(layer, frame.shape)
    x = np.ascontiguousarray(frame.transpose(2, 0, 1), np.float32)[None]
    shape = conv2d_shape(x.shape, layer.weights.shape, None, 1, layer.size // 2)
    maps = conv2d_cpu(x, layer.weights, None, shape)
    if layer.relu:
        np.maximum(maps, 0, out=maps)
    if layer.pool > 1:
        maps = max_pool2d_cpu(maps, layer.pool, layer.pool)
    return compose_frame(maps[0], frame.shape, mosaic(layer.maps, frame.shape))


def check_sample_type(stages: Sequence, dtype) -> None:
    """Refuse frames of ``dtype`` (a NumPy dtype) that a stage (a FilterStage) cannot filter:
    convolution-layer stages (the ``bank`` filter) take uint8 frames only; the others take uint8
    and uint16.

    Raises:
        FrameTypeError: naming the stage and the dtype.
    """
    if np.dtype(dtype) == np.uint8:
        return
    for stage in stages:
        if stage.layer is not None:
            raise FrameTypeError(f"stage {stage.describe()} takes uint8 frames only, "
                                 f"got {np.dtype(dtype)}")
