"""The layers on the GPU through the CUDA binding: kernel choice, launch geometry and launches.

Tensors here are :class:`Tensor`s (float32, C-contiguous, device memory) in the context the
:class:`GpuEngine` holds. Work is queued on ``stream`` (a binding's stream; the legacy default
stream if None); nothing here waits for the GPU.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..gpu.device import cuda_status, load_binding
from ..errors import BackendUnavailableError, ShapeError
from ..gpu.binding import Binding, Context, Kernel
from ..gpu.loader import load_module
from .shapes import ConvShape

log = logging.getLogger(__name__)

SOURCES = {"nn_conv": "sm_75", "nn_ops": "sm_75", "gemm": "sm_75", "conv_tf32": "sm_80"}
"""The layers' kernel files in cuda/nn/ -> the oldest architecture each runs on (conv_tf32.cu
issues sm_80's TF32 ``mma``)."""
METHODS = ("direct", "tiled", "im2col", "tf32")
"""conv2d implementations: the textbook's one-thread-per-output kernel, the shared-memory tiled
kernel with register blocking, im2col unrolling followed by a tiled GEMM (all float32), and an
implicit GEMM on the tensor cores with TF32 operands (sm_80 on; about 3 decimal digits: within
2^-10 of sum |w x| of the float32 result, never chosen by ``auto``)."""

DEFAULT_METHOD = "tiled"
"""What ``method="auto"`` runs on the GPU: the fastest in ``benchmarks/nn.py`` on the H100."""

DEFAULT_WORKSPACE_BYTES = 1 << 30
"""im2col columns are unrolled at most this many bytes at a time, then multiplied: fewer, larger
rounds are faster, as each round ends in a tail of idle SMs (benchmarks/README.md, "Where the
tuning constants ... come from")."""

_DIRECT_TILE = 16
_IM2COL_THREADS = 256
_ELEMENTWISE_THREADS = 256
_SHARED_BUDGET = 46 * 1024  # static shared memory per block is capped at 48 KB
_MAX_CHUNK_CHANNELS = 8
# conv_tf32.cu's pixel tile, channels, block
_TF32_TILE, _TF32_CHANNELS, _TF32_THREADS = (8, 16), 64, 256


def tiled_defines(shape: ConvShape) -> dict[str, int] | None:
    """The #defines of nn_conv.cu's conv_tiled for a call, or None when even a 4-channel block's
    input tile and taps for one input channel overflow shared memory (then ``im2col`` runs).

    Threads take 4 adjacent outputs of a row for MT output channels; a block has 256 threads
    and MB output channels (the smallest power of two >= M, at most 64), shrunk until one input
    channel fits in the shared-memory budget; it then stages CB input channels at a time.
    """
    k, s = shape.k, shape.stride
    mt = 4 if shape.m <= 4 else 8 if shape.m <= 8 else 16
    mb = mt if mt < 16 else min(64, 1 << (shape.m - 1).bit_length())
    tile_w, px = 32, 4
    while True:
        tile_h = 256 // (mb // mt) * px // tile_w
        in_h, in_w = (tile_h - 1) * s + k, (tile_w - 1) * s + k
        per_channel = (in_h * in_w + k * k * mb) * 4
        if per_channel <= _SHARED_BUDGET:
            break
        if mb == 4:
            return None
        mb //= 2
        mt = min(mt, mb)
    chunk = max(1, min(_MAX_CHUNK_CHANNELS, shape.c, _SHARED_BUDGET // per_channel))
    # Two or three resident blocks per SM beat one with no register limit, despite a few spilled
    # bytes (benchmarks/README.md).
    return {"KSIZE": k, "STRIDE": s, "TILE_W": tile_w, "TILE_H": tile_h, "PX": px, "MT": mt,
            "MB": mb, "CB": chunk, "MIN_BLOCKS": 2 if mt == 16 else 3}


def tf32_defines(shape: ConvShape) -> dict[str, int] | None:
    """The #defines of conv_tf32.cu for a call, or None when a chunk's input patch (8 channels of
    (8 - 1) x stride + K by (16 - 1) x stride + K, each plane padded as the kernel pads it)
    overflows shared memory (then ``tiled`` runs)."""
    rows, columns = 7 * shape.stride + shape.k, 15 * shape.stride + shape.k
    plane = (rows * columns + 23) // 32 * 32 + 8
    if 8 * plane * 4 > 48 * 1024:
        return None
    return {"KSIZE": shape.k, "STRIDE": shape.stride}


def check_method(method: str) -> str:
    """``method`` ("auto" or one of :data:`METHODS`) resolved to the implementation that runs.

    Raises:
        ShapeError: an unknown method.
    """
    if method != "auto" and method not in METHODS:
        raise ShapeError(f"conv2d: unknown method {method!r}; known: auto, {', '.join(METHODS)}")
    return DEFAULT_METHOD if method == "auto" else method


def tiled_threads(defines: dict[str, int]) -> int:
    """Threads per block of conv_tiled under ``defines`` (THREADS in nn_conv.cu)."""
    return defines["TILE_H"] * defines["TILE_W"] // defines["PX"] * (defines["MB"] // defines["MT"])


def gemm_threads(defines: dict[str, int]) -> int:
    """Threads per block of sgemm_bias under ``defines`` (THREADS in gemm.cu)."""
    return (defines["BM"] // defines["TM"]) * (defines["BN"] // defines["TN"])


def gemm_defines(rows: int) -> dict[str, int]:
    """The #defines of gemm.cu for an output of ``rows`` rows (M): the row tile grows with M.

    Four blocks per SM (at most 128 registers) and, from 32 rows on, 64-column tiles: the
    fastest in benchmarks/nn.py (benchmarks/README.md).
    """
    for bm, tm in ((8, 1), (16, 2), (32, 4), (64, 8)):
        if rows <= bm:
            columns = {"BN": 128, "TN": 8} if bm < 32 else {"BN": 64, "TN": 4}
            return {"BM": bm, "TM": tm, **columns, "BK": 16, "MIN_BLOCKS": 4}
    # 256 threads: 128 registers
    return {"BM": 128, "TM": 8, "BN": 64, "TN": 4, "BK": 16, "MIN_BLOCKS": 2}


def im2col_expansion(shape: ConvShape) -> float:
    """Elements of the unrolled matrix (C K K x Ho Wo per image) over elements of the input."""
    return shape.k * shape.k * shape.out_h * shape.out_w / (shape.h * shape.w)


@dataclass
class Tensor:
    """A float32 C-contiguous tensor in device memory.

    Attributes:
        address: its first element's device address. shape: its shape.
        owner: what keeps the memory alive (its device buffer, or the caller's array).
    """

    address: int
    shape: tuple[int, ...]
    owner: Any = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def at(self, offset_elements: int) -> int:
        """The device address ``offset_elements`` float32 elements in."""
        return self.address + 4 * offset_elements


# Argument signatures of the kernels (see gpu.binding.Kernel): P a device address, i an int32,
# q an int64, one character per argument in the order of cuda/nn_*.cu, gemm.cu, conv_tf32.cu.
_SIGNATURES = {"transpose_taps": "PPiii", "conv_direct": "PPPP" + "i" * 10,
               "conv_tiled": "PPPP" + "i" * 8, "im2col": "PPiiiiiiiqi", "sgemm_bias": "PPPPiiiii",
               "tf32_taps": "PPiiii", "conv_tf32": "PPPP" + "i" * 8, "relu": "PPq",
               "max_pool2d": "PP" + "i" * 6, "frame_to_planes": "PiPiii",
               "maps_to_frame": "PiiiP" + "i" * 8}


class GpuEngine:
    """Compiled layer kernels in one CUDA context, and the calls that launch them.

    Use :func:`engine` to get one: it takes the calling thread's current context if there is
    one (so device arrays the caller made are valid here), else the device's primary context,
    which it pushes around each call. ``context`` must outlive the engine.

    Args:
        gpu: the CUDA binding. context: the context to push, or None when it is current already
            (``push`` False).
    """

    def __init__(self, gpu: Binding, context: Context | None, *, push: bool) -> None:
        self.gpu = gpu
        self.context = context
        self._push = push
        with self.activated():
            device = gpu.current_device()
        major, minor = device.compute_capability
        self.arch = f"sm_{major}{minor}"
        self.device_name = device.name
        self.device_number = device.ordinal
        self._functions: dict[tuple, tuple] = {}
        self._workspaces: dict[int, Tensor] = {}  # per stream: two streams' kernels share none

    @contextlib.contextmanager
    def activated(self) -> Iterator[None]:
        """Make the engine's context current for the block (a no-op when it already is)."""
        if not self._push:
            yield
            return
        self.context.push()
        try:
            yield
        finally:
            self.context.pop()

    def function(self, source: str, name: str, defines: dict[str, int] | None = None) -> Kernel:
        """Kernel ``name`` of kernel file ``source`` (in cuda/nn/) compiled with ``defines``,
        loaded once."""
        key = (source, name, tuple(sorted((defines or {}).items())))
        if key not in self._functions:
            module = load_module(source, defines or {}, self.arch, self.gpu)
            self._functions[key] = (module, module.kernel(name, _SIGNATURES[name]))
        return self._functions[key][1]

    # -- device tensors, in this engine's context --

    def empty(self, shape: tuple[int, ...]) -> Tensor:
        """A new float32 tensor of ``shape`` (contents undefined), freed when dropped."""
        buffer = self.gpu.alloc(4 * int(np.prod(shape)))
        return Tensor(int(buffer), tuple(shape), buffer)

    def to_device(self, array: np.ndarray) -> Tensor:
        """A new tensor holding host ``array`` (float32, C-contiguous), copied now."""
        tensor = self.empty(array.shape)
        self.gpu.copy_htod(tensor.address, np.ascontiguousarray(array, np.float32))
        return tensor

    def to_host(self, tensor: Tensor) -> np.ndarray:
        """``tensor`` copied into a new host array once the legacy default stream's work is done."""
        host = np.empty(tensor.shape, np.float32)
        self.gpu.copy_dtoh(host, tensor.address)
        return host

    # -- launches; every tensor argument is a float32 Tensor in this engine's context --

    def transpose_taps(self, w: Tensor, stream=None) -> Tensor:
        """w (M x C x K x K) -> a new C x K x K x M tensor."""
        m, c, k, _ = w.shape
        w_t = self.empty((c, k, k, m))
        self.function("nn_conv", "transpose_taps").launch(
            stream, (-(-w.size // _ELEMENTWISE_THREADS), 1), (_ELEMENTWISE_THREADS, 1, 1),
            w.address, w_t.address, m, c, k * k)
        return w_t

    def conv2d_into(self, y, x, w, bias, shape: ConvShape, *, method: str = DEFAULT_METHOD,
                    stream=None, workspace_bytes: int = DEFAULT_WORKSPACE_BYTES, w_t=None) -> None:
        """Queue y = conv2d(x, w) + bias with ``method`` (one of :data:`METHODS`).

        Args:
            y: N x M x Ho x Wo output. x: N x C x H x W. w: M x C x K x K. bias: (M,) or None.
            w_t: the taps already transposed by :meth:`transpose_taps` (tiled, im2col), if at hand.
        """
        method = check_method(method)
        if method == "direct":
            self._direct(y, x, w, bias, shape, stream)
            return
        if method == "tf32":
            defines = tf32_defines(shape)
            if defines is not None:
                self._tf32(y, x, w, bias, shape, defines, stream)
                return
            log.info("conv2d: K=%d, stride %d overflow the tf32 kernel's shared memory; using "
                     "tiled",
                     shape.k, shape.stride)
            method = "tiled"
        w_t = self.transpose_taps(w, stream) if w_t is None else w_t
        defines = tiled_defines(shape) if method == "tiled" else None
        if defines is not None:
            self._tiled(y, x, w_t, bias, shape, defines, stream)
            return
        if method == "tiled":
            log.info("conv2d: K=%d, stride %d overflow the tiled kernel's shared memory; using "
                     "im2col",
                     shape.k, shape.stride)
        self._im2col_gemm(y, x, w_t, bias, shape, stream, workspace_bytes)

    def _direct(self, y: Tensor, x: Tensor, w: Tensor, bias: Tensor | None, shape: ConvShape,
                stream) -> None:
        tiles_x = -(-shape.out_w // _DIRECT_TILE)
        tiles = tiles_x * -(-shape.out_h // _DIRECT_TILE)
        self.function("nn_conv", "conv_direct", {"DIRECT_TILE": _DIRECT_TILE}).launch(
            stream, (tiles, shape.m, shape.n), (_DIRECT_TILE, _DIRECT_TILE, 1),
            x.address, w.address, _address(bias), y.address, shape.c, shape.h, shape.w, shape.m,
            shape.out_h, shape.out_w, shape.k, shape.stride, shape.padding, tiles_x)

    def _tf32(self, y: Tensor, x: Tensor, w: Tensor, bias: Tensor | None, shape: ConvShape,
              defines: dict[str, int], stream) -> None:
        oldest = SOURCES["conv_tf32"]
        if int(self.arch[3:]) < int(oldest[3:]):
            raise ShapeError(f"conv2d: method 'tf32' needs a GPU of {oldest} or later (TF32 mma); "
                             f"this one is {self.arch}: use method='auto'")
        chunks, mtiles = -(-shape.c // 8), -(-shape.m // 16)
        words = chunks * shape.k * shape.k * mtiles * 128
        taps = self._workspace(words, stream)  # 32-bit words, read as TF32 fragments
        self.function("conv_tf32", "tf32_taps", defines).launch(
            stream, (-(-words // _ELEMENTWISE_THREADS), 1), (_ELEMENTWISE_THREADS, 1, 1),
            w.address, taps.address, shape.m, shape.c, chunks, mtiles)
        tiles = -(-shape.out_w // _TF32_TILE[1]) * -(-shape.out_h // _TF32_TILE[0])
        self.function("conv_tf32", "conv_tf32", defines).launch(
            stream, (tiles, -(-shape.m // _TF32_CHANNELS), shape.n), (_TF32_THREADS, 1, 1),
            x.address, taps.address, _address(bias), y.address, shape.c, shape.h, shape.w, shape.m,
            shape.out_h, shape.out_w, shape.padding, mtiles)

    def _tiled(self, y: Tensor, x: Tensor, w_t: Tensor, bias: Tensor | None, shape: ConvShape,
               defines: dict[str, int], stream) -> None:
        m_blocks = -(-shape.m // defines["MB"])
        grid = (-(-shape.out_w // defines["TILE_W"]), -(-shape.out_h // defines["TILE_H"]),
                shape.n * m_blocks)
        self.function("nn_conv", "conv_tiled", defines).launch(
            stream, grid, (tiled_threads(defines), 1, 1),
            x.address, w_t.address, _address(bias), y.address, shape.c, shape.h, shape.w, shape.m,
            shape.out_h, shape.out_w, shape.padding, m_blocks)

    def _im2col_gemm(self, y: Tensor, x: Tensor, w_t: Tensor, bias: Tensor | None,
                     shape: ConvShape, stream, workspace_bytes: int) -> None:
        pixels = shape.out_h * shape.out_w
        depth = shape.c * shape.k * shape.k
        gemm = gemm_defines(shape.m)
        columns = min(pixels,
                      max(gemm["BN"], workspace_bytes // (4 * depth) // gemm["BN"] * gemm["BN"]))
        workspace = self._workspace(depth * columns, stream)
        unroll = self.function("nn_conv", "im2col")
        multiply = self.function("gemm", "sgemm_bias", gemm)
        threads = gemm_threads(gemm)
        for n in range(shape.n):
            image = x.at(n * shape.c * shape.h * shape.w)
            for first in range(0, pixels, columns):
                count = min(columns, pixels - first)
                unroll.launch(stream, (-(-count // _IM2COL_THREADS), shape.c * shape.k),
                              (_IM2COL_THREADS, 1, 1), image, workspace.address, shape.c,
                              shape.h, shape.w, shape.out_w, shape.k, shape.stride, shape.padding,
                              first, count)
                multiply.launch(stream, (-(-count // gemm["BN"]), -(-shape.m // gemm["BM"])),
                                (threads, 1, 1), w_t.address, workspace.address, _address(bias),
                                y.at(n * shape.m * pixels + first), shape.m, count, depth, count,
                                pixels)

    def _workspace(self, elements: int, stream) -> Tensor:
        """A float32 scratch buffer of at least ``elements``, kept per stream and grown when
        short."""
        key = 0 if stream is None else int(stream.handle)
        found = self._workspaces.get(key)
        if found is None or found.size < elements:
            if found is not None and stream is not None:
                stream.synchronize()  # queued kernels may still read the old buffer
            elif found is not None:
                self.gpu.synchronize()
            found = self._workspaces[key] = self.empty((elements,))
        return found

    def relu_into(self, y: Tensor, x: Tensor, stream=None) -> None:
        """Queue y = max(x, 0); y may be x."""
        count = x.size
        self.function("nn_ops", "relu").launch(
            stream, (-(-count // _ELEMENTWISE_THREADS), 1), (_ELEMENTWISE_THREADS, 1, 1),
            x.address, y.address, count)

    def max_pool2d_into(self, y: Tensor, x: Tensor, kernel: int, stride: int, stream=None) -> None:
        """Queue y (N x C x Ho x Wo) = the window maxima of x (N x C x H x W)."""
        n, c, h, w = x.shape
        out_h, out_w = y.shape[2], y.shape[3]
        self.function("nn_ops", "max_pool2d").launch(
            stream, (-(-(out_h * out_w) // _ELEMENTWISE_THREADS), n * c),
            (_ELEMENTWISE_THREADS, 1, 1), x.address, y.address, h, w, out_h, out_w, kernel, stride)


def _address(tensor: Tensor | None) -> int:
    return 0 if tensor is None else tensor.address


_engines: dict[int, GpuEngine] = {}


def engine(device: int = 0) -> GpuEngine:
    """The engine of the calling thread's current CUDA context, else of ``device``'s primary
    context.

    Raises:
        BackendUnavailableError: the binding, the driver or the device is missing.
    """
    gpu = load_binding("streamconv.nn on the GPU")
    if gpu.current_context() is not None:
        # Not cached: a context the caller made may be destroyed, and a later one reuse its handle.
        return GpuEngine(gpu, None, push=False)
    usable, reason = cuda_status(device)
    if not usable:
        raise BackendUnavailableError(f"streamconv.nn: cuda unavailable: {reason}")
    found = _engines.get(device)
    if found is None:  # the engine keeps its retain of the primary context, so it stays valid
        context = gpu.device(device).retain_primary_context()
        found = _engines[device] = GpuEngine(gpu, context, push=True)
    return found
