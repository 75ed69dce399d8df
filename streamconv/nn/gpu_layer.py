"""A convolution layer over video frames on the GPU (:mod:`streamconv.nn.layer` has the CPU twin).

Per frame, on the caller's stream: the uint8 frame to float planes, conv2d with streamconv.nn's
kernels (zero padding K // 2), ReLU and max-pooling if asked, then the maps composed into the
uint8 output frame, all in device memory. The CUDA backend runs a ``bank`` filter stage through
it, handing over its frame buffers as raw device pointers and its slot's stream; the float
buffers are kept per slot (:class:`LayerBuffers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError
from .gpu import GpuEngine
from .layer import ConvLayer, check_frame, mosaic
from .shapes import conv2d_shape

_BLOCK = (32, 8, 1)


@dataclass
class LayerBuffers:
    """One slot's device tensors: planes C x H x W, maps M x H x W, pooled M x Hm x Wm (float32)."""

    planes: Any
    maps: Any
    pooled: Any  # ``maps`` itself when there is no pooling

    def free(self) -> None:
        """Free the device memory now (the context must be current)."""
        for tensor in {id(t): t for t in (self.planes, self.maps, self.pooled)}.values():
            tensor.gpudata.free()


class GpuLayer:
    """The launches of one convolution layer for (H, W, C) frames, in the current CUDA context.

    Args:
        layer: the layer. shape: (H, W, C) of the frames. gpu: the engine of the current context.

    Raises:
        FrameFormatError: the frames do not fit the layer (channels, pool).
    """

    def __init__(self, layer: ConvLayer, shape: tuple[int, int, int], gpu: GpuEngine) -> None:
        from pycuda import gpuarray  # optional (the cuda extra): imported when a layer runs on the GPU

        self.layer, self.shape, self.gpu = layer, shape, gpu
        self.map_size = check_frame(layer, shape)
        height, width, channels = shape
        self.conv = conv2d_shape((1, channels, height, width), layer.weights.shape, None, 1, layer.size // 2)
        self.layout = mosaic(layer.maps, shape)
        self.weights = gpuarray.to_gpu(layer.weights)
        self.weights_t = gpu.transpose_taps(self.weights)
        self.to_planes = gpu.function("nn_ops", "frame_to_planes")
        self.to_frame = gpu.function("nn_ops", "maps_to_frame")
        self.grid = (-(-width // _BLOCK[0]), -(-height // _BLOCK[1]))

    def allocate(self) -> LayerBuffers:
        """Device buffers for one slot.

        Raises:
            BackendUnavailableError: not enough device memory, before any frame.
        """
        import pycuda.driver as driver  # optional (the cuda extra), as above
        from pycuda import gpuarray

        height, width, channels = self.shape
        maps = self.layer.maps
        try:
            planes = gpuarray.empty((1, channels, height, width), np.float32)
            conv_out = gpuarray.empty((1, maps, height, width), np.float32)
            pooled = conv_out if self.layer.pool == 1 else gpuarray.empty((1, maps, *self.map_size), np.float32)
        except (driver.MemoryError, driver.Error) as exc:
            megabytes = 4 * height * width * (channels + maps) / 2**20
            raise BackendUnavailableError(f"not enough GPU memory for the layer's maps "
                                          f"({megabytes:.0f} MiB per slot): {exc}") from None
        return LayerBuffers(planes, conv_out, pooled)

    def free(self) -> None:
        """Free the weights' device memory now (the context must be current)."""
        for tensor in (self.weights, self.weights_t):
            tensor.gpudata.free()

    def launch(self, buffers: LayerBuffers, source: int, source_pitch: int, target: int, target_pitch: int,
               stream) -> None:
        """Queue the layer on ``stream`` (a PyCUDA stream): the pitched uint8 frame at device address
        ``source`` (``source_pitch`` bytes per row) -> the pitched uint8 frame at ``target``."""
        height, width, channels = self.shape
        self.to_planes(np.uintp(source), np.int32(source_pitch), buffers.planes.gpudata, np.int32(height),
                       np.int32(width), np.int32(channels), block=_BLOCK, grid=self.grid, stream=stream)
        self.gpu.conv2d_into(buffers.maps, buffers.planes, self.weights, None, self.conv, stream=stream,
                             w_t=self.weights_t)
        if self.layer.relu:
            self.gpu.relu_into(buffers.maps, buffers.maps, stream=stream)
        if self.layer.pool > 1:
            self.gpu.max_pool2d_into(buffers.pooled, buffers.maps, self.layer.pool, self.layer.pool, stream=stream)
        layout = self.layout
        self.to_frame(buffers.pooled.gpudata, np.int32(self.layer.maps), np.int32(self.map_size[0]),
                      np.int32(self.map_size[1]), np.uintp(target), np.int32(target_pitch), np.int32(height),
                      np.int32(width), np.int32(channels), np.int32(layout.cols), np.int32(layout.cell_h),
                      np.int32(layout.cell_w), np.int32(layout.colour), block=_BLOCK, grid=self.grid,
                      stream=stream)
