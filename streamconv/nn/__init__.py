"""Convolution-layer operators on float32 NCHW tensors: conv2d, relu, max_pool2d.

The GPU runs them when a CUDA binding and a device are present (``backend="auto"``), the CPU
otherwise::

    from streamconv import nn
    y = nn.conv2d(x, w, bias, stride=1, padding=1)      # x: N x C x H x W, w: M x C x K x K
    y = nn.max_pool2d(nn.relu(y), 2)

NumPy arrays in give NumPy arrays out (copied to the GPU and back). CUDA device arrays (CuPy,
PyTorch, PyCUDA, Numba: ``__cuda_array_interface__`` or DLPack; float32, C-contiguous) are used in
place, in the caller's current CUDA context, and give a
:class:`~streamconv.interop.device_frame.DeviceFrame`, the device array the rest of streamconv
returns too, which CuPy and PyTorch take without a copy (``cupy.asarray``, ``torch.from_dlpack``).
Work runs on the legacy default stream, in order with theirs by default. ``conv2d`` has four GPU
implementations (``method``): ``direct``, ``tiled`` and ``im2col`` in float32, and ``tf32`` on the
tensor cores (TF32 operands: about 3 decimal digits, stated in :data:`METHODS`); ``auto`` picks
``tiled``. The float64 references (``conv2d_reference`` ...) are the oracle the tests and benchmarks
use.

A layer also runs over video frames, as the ``bank`` filter: :mod:`streamconv.nn.layer` reads
its weights and runs it on the CPU, :mod:`streamconv.nn.gpu_layer` on the GPU (the CUDA backend
hands it device pointers and a stream). nn imports no module of :mod:`streamconv.backends`:
whether CUDA is usable comes from :mod:`streamconv.gpu.device`, compiled kernels from
:mod:`streamconv.gpu.loader`.

Also here: :mod:`.cpu` (the CPU fallback of the layers: float32 im2col + BLAS matrix product);
:mod:`.reference` (NumPy references of the layers, in float64: the oracle the GPU implementations
are); :mod:`.shapes` (shape checks of the convolution-layer operators).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..gpu.device import cuda_status
from ..errors import BackendUnavailableError, SettingsError, ShapeError
from ..interop.device_frame import wrap_device_array
from ..interop.raw import is_device_array, raw_device_array
from . import cpu
from .gpu import METHODS, GpuEngine, Tensor, check_method, engine, im2col_expansion
from .reference import conv2d_reference, max_pool2d_reference, relu_reference
from .shapes import ConvShape, conv2d_shape, pool_shape

__all__ = ["conv2d", "relu", "max_pool2d", "conv2d_reference", "relu_reference",
           "max_pool2d_reference",
           "conv2d_shape", "pool_shape", "ConvShape", "METHODS", "im2col_expansion"]

log = logging.getLogger(__name__)

_BACKENDS = ("auto", "cpu", "cuda")
_fallback_noted = False


def _use_gpu(tensors: tuple, backend: str, device: int) -> bool:
    """Where to run: device arrays stay on the GPU; host arrays go where ``backend`` says."""
    global _fallback_noted
    if backend not in _BACKENDS:
        raise SettingsError(f"unknown backend {backend!r}; known: {', '.join(_BACKENDS)}")
    if any(is_device_array(t) for t in tensors):
        if backend == "cpu":
            raise ShapeError("backend='cpu' was given device arrays; pass NumPy arrays")
        return True
    if backend == "cpu":
        return False
    usable, reason = cuda_status(device)
    if backend == "cuda":
        if not usable:
            raise BackendUnavailableError(f"cuda backend unavailable: {reason}")
        return True
    if not usable and not _fallback_noted:
        log.warning("streamconv.nn: cuda unavailable (%s); running on the cpu", reason)
        _fallback_noted = True
    return usable


def _host_float32(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise ShapeError(f"{what}: dtype {array.dtype} is not a real number type")
    return np.ascontiguousarray(array, dtype=np.float32)


def _device_float32(gpu: GpuEngine, value: Any, what: str) -> Tensor:
    """A float32 contiguous device tensor: device arrays are checked and used in place, host
    arrays uploaded."""
    if is_device_array(value):
        raw = raw_device_array(value)
        if raw.dtype != np.float32 or not raw.c_contiguous:
            raise ShapeError(f"{what}: expected a C-contiguous float32 device array, "
                             f"got {raw.dtype} with strides {raw.strides}")
        return Tensor(raw.address, raw.shape, raw.owner)  # the owner keeps the memory alive
    return gpu.to_device(_host_float32(value, what))


def _run_on_gpu(device: int, inputs: tuple, names: tuple, out_shape: tuple, launch):
    """Upload host inputs (device arrays pass), allocate the output, queue ``launch(gpu, y,
    *inputs)``; a DeviceFrame when the first input was a device array, else the result copied to
    the host."""
    gpu = engine(device)
    with gpu.activated():
        tensors = [None if t is None else _device_float32(gpu, t, name)
                   for t, name in zip(inputs, names)]
        y = gpu.empty(out_shape)
        launch(gpu, y, *tensors)
        if is_device_array(inputs[0]):
            return wrap_device_array(y.owner, y.address, out_shape, np.float32, gpu.device_number)
        return gpu.to_host(y)


def conv2d(x: Any, w: Any, bias: Any = None, *, stride: int = 1, padding: int = 0,
           method: str = "auto", backend: str = "auto", device: int = 0):
    """Convolution layer (cross-correlation): y[n,m] = bias[m] + sum_c x[n,c] (*) w[m,c].

    Args:
        x: N x C x H x W, a host array (any real dtype, computed in float32) or a float32
            device array.
        w: M x C x K x K taps, host or device array. bias: (M,) or None.
        stride: output step in pixels (>= 1). padding: zero rows/columns added on every side.
        method: ``auto`` (``tiled``), ``direct``, ``tiled``, ``im2col`` or ``tf32`` (tensor
            cores, TF32 operands: within 2^-10 of sum |w x| of the float32 result; sm_80 on).
            GPU only; the CPU runs im2col with BLAS whatever is asked.
        backend: ``auto`` (GPU if usable), ``cuda`` or ``cpu``. device: CUDA device number.

    Returns:
        N x M x Ho x Wo float32, Ho = (H + 2 padding - K) // stride + 1: a NumPy array for host
        ``x``, a DeviceFrame (device memory of the caller's context) for a device array ``x``.

    Raises:
        ShapeError: mismatched shapes (actual and expected shown), bad stride, padding or method.
        BackendUnavailableError: ``backend="cuda"`` without a usable GPU.
    """
    shape = conv2d_shape(np.shape(x), np.shape(w), None if bias is None else np.shape(bias), stride,
                         padding)
    chosen = check_method(method)
    if not _use_gpu((x, w, bias), backend, device):
        return cpu.conv2d_cpu(_host_float32(x, "conv2d: x"), _host_float32(w, "conv2d: w"),
                              None if bias is None else _host_float32(bias, "conv2d: bias"), shape)
    return _run_on_gpu(device, (x, w, bias), ("conv2d: x", "conv2d: w", "conv2d: bias"),
                       shape.out_shape,
                       lambda gpu, y, x_d, w_d, bias_d: gpu.conv2d_into(y, x_d, w_d, bias_d, shape,
                                                                        method=chosen))


def relu(x: Any, *, backend: str = "auto", device: int = 0):
    """max(x, 0) element-wise.

    Args:
        x: any shape; a host array (computed in float32) or a float32 device array.

    Returns:
        float32 of x's shape, on the host for host input, else a DeviceFrame.
    """
    if not _use_gpu((x,), backend, device):
        return cpu.relu_cpu(_host_float32(x, "relu: x"))
    return _run_on_gpu(device, (x,), ("relu: x",), np.shape(x),
                       lambda gpu, y, x_d: gpu.relu_into(y, x_d))


def max_pool2d(x: Any, kernel: int, stride: int | None = None, *, backend: str = "auto",
               device: int = 0):
    """The maximum over each kernel x kernel window, windows ``stride`` apart (default ``kernel``).

    Args:
        x: N x C x H x W, a host array or a float32 device array.

    Returns:
        N x C x Ho x Wo float32 with Ho = (H - kernel) // stride + 1 (floor: windows lie inside x),
        on the host for host input, else a DeviceFrame.
    """
    stride = kernel if stride is None else stride
    out_shape = pool_shape(np.shape(x), kernel, stride)
    if not _use_gpu((x,), backend, device):
        return cpu.max_pool2d_cpu(_host_float32(x, "max_pool2d: x"), kernel, stride)
    return _run_on_gpu(device, (x,), ("max_pool2d: x",), out_shape,
                       lambda gpu, y, x_d: gpu.max_pool2d_into(y, x_d, int(kernel), int(stride)))
