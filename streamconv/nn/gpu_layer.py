"""A convolution layer over video frames on the GPU (:mod:`streamconv.nn.layer` has the CPU twin).

Per frame, on the caller's stream: the uint8 frame to float planes, conv2d with streamconv.nn's
kernels (zero padding K // 2), ReLU and max-pooling if asked, then the maps composed into the
uint8 output frame, all in device memory. The CUDA backend runs a ``bank`` filter stage through
it, handing over its frame buffers as raw device pointers and its slot's stream; the float
buffers are kept per slot (:class:`LayerBuffers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BackendUnavailableError
from .gpu import GpuEngine, Tensor
from .layer import ConvLayer, check_frame, mosaic
from .shapes import conv2d_shape

_BLOCK = (32, 8, 1)


@dataclass
class LayerBuffers:
    """One slot's device tensors: planes C x H x W, maps M x H x W, pooled M x Hm x Wm (float32)."""

    planes: Tensor
    maps: Tensor
    pooled: Tensor  # ``maps`` itself when there is no pooling

    def free(self) -> None:
        """Free the device memory now."""
        for tensor in {id(t): t for t in (self.planes, self.maps, self.pooled)}.values():
            tensor.owner.free()


class GpuLayer:
    """The launches of one convolution layer for (H, W, C) frames, in the current CUDA context.

    Args:
        layer: the layer. shape: (H, W, C) of the frames. gpu: the engine of the current context.

    Raises:
        FrameFormatError: the frames do not fit the layer (channels, pool).
    """

    def __init__(self, layer: ConvLayer, shape: tuple[int, int, int], gpu: GpuEngine) -> None:
        self.layer, self.shape, self.gpu = layer, shape, gpu
        self.map_size = check_frame(layer, shape)
        height, width, channels = shape
        self.conv = conv2d_shape((1, channels, height, width), layer.weights.shape, None, 1,
                                 layer.size // 2)
        self.layout = mosaic(layer.maps, shape)
        self.weights = gpu.to_device(layer.weights)
        self.weights_t = gpu.transpose_taps(self.weights)
        self.to_planes = gpu.function("nn_ops", "frame_to_planes")
        self.to_frame = gpu.function("nn_ops", "maps_to_frame")
        self.grid = (-(-width // _BLOCK[0]), -(-height // _BLOCK[1]))

    def allocate(self) -> LayerBuffers:
        """Device buffers for one slot.

        Raises:
            BackendUnavailableError: not enough device memory, before any frame.
        """
        height, width, channels = self.shape
        maps = self.layer.maps
        try:
            planes = self.gpu.empty((1, channels, height, width))
            conv_out = self.gpu.empty((1, maps, height, width))
            pooled = conv_out if self.layer.pool == 1 else self.gpu.empty((1, maps, *self.map_size))
        except self.gpu.gpu.errors as exc:
            megabytes = 4 * height * width * (channels + maps) / 2**20
            raise BackendUnavailableError(f"not enough GPU memory for the layer's maps "
                                          f"({megabytes:.0f} MiB per slot): {exc}") from None
        return LayerBuffers(planes, conv_out, pooled)

    def free(self) -> None:
        """Free the weights' device memory now."""
        for tensor in (self.weights, self.weights_t):
            tensor.owner.free()

    def launch(self, buffers: LayerBuffers, source: int, source_pitch: int, target: int,
               target_pitch: int, stream) -> None:
        """Queue the layer on ``stream`` (a binding's stream): the pitched uint8 frame at device
        address ``source`` (``source_pitch`` bytes per row) -> the pitched uint8 frame at
        ``target``."""
        height, width, channels = self.shape
        self.to_planes.launch(stream, self.grid, _BLOCK, source, source_pitch,
                              buffers.planes.address, height, width, channels)
        self.gpu.conv2d_into(buffers.maps, buffers.planes, self.weights, None, self.conv,
                             stream=stream, w_t=self.weights_t)
        if self.layer.relu:
            self.gpu.relu_into(buffers.maps, buffers.maps, stream=stream)
        if self.layer.pool > 1:
            self.gpu.max_pool2d_into(buffers.pooled, buffers.maps, self.layer.pool, self.layer.pool,
                                     stream=stream)
        layout, (map_h, map_w) = self.layout, self.map_size
        self.to_frame.launch(stream, self.grid, _BLOCK, buffers.pooled.address, self.layer.maps,
                             map_h, map_w, target, target_pitch, height, width, channels,
                             layout.cols, layout.cell_h, layout.cell_w, layout.colour)
