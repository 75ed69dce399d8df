"""streamconv.nn on the GPU: every conv2d method, relu and max_pool2d against the float64
references,
on fresh random data, with every output poisoned (NaN) before the kernels run."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv import nn
from streamconv.errors import ShapeError
from streamconv.interop.device_frame import DeviceFrame, wrap_device_array
from streamconv.nn.gpu import METHODS, engine, tf32_defines, tiled_defines
from streamconv.nn.shapes import conv2d_shape

from helpers.nn import TOLERANCE, relative_error

pytestmark = pytest.mark.cuda

# (N, C, H, W), (M, K), stride, padding: odd sizes, channel counts that leave partial chunks and
# partial output-channel blocks, even K, strides, and the largest K.
CASES = [
    ((1, 3, 1, 1), (8, 3), 1, 1),
    ((1, 1, 5, 7), (1, 1), 1, 0),
    ((2, 13, 37, 29), (5, 3), 1, 1),
    ((1, 16, 50, 70), (64, 5), 2, 2),
    ((2, 64, 33, 65), (64, 3), 1, 1),
    ((1, 3, 40, 41), (70, 7), 3, 3),
    ((1, 4, 9, 10), (3, 2), 1, 0),
    ((3, 9, 21, 19), (17, 4), 2, 1),
    ((1, 2, 40, 40), (4, 31), 1, 15),
    ((1, 3, 45, 60), (33, 31), 3, 0),
]


def poisoned_conv2d(method: str, x, w, bias, stride: int, padding: int, **options) -> np.ndarray:
    """conv2d through GpuEngine.conv2d_into into an output filled with NaN first."""
    shape = conv2d_shape(x.shape, w.shape, None if bias is None else bias.shape, stride, padding)
    gpu = engine()
    with gpu.activated():
        y = gpu.to_device(np.full(shape.out_shape, np.nan, np.float32))
        bias_d = None if bias is None else gpu.to_device(bias)
        gpu.conv2d_into(y, gpu.to_device(x), gpu.to_device(w), bias_d, shape, method=method,
                        **options)
        return gpu.to_host(y)


def device_array(gpu, array: np.ndarray) -> DeviceFrame:
    """``array`` copied into device memory, as a DeviceFrame (a device array of any dtype)."""
    buffer = gpu.gpu.alloc(array.nbytes)
    gpu.gpu.copy_htod(int(buffer), np.ascontiguousarray(array))
    return wrap_device_array(buffer, int(buffer), array.shape, array.dtype, gpu.device_number)


def random_case(rng, x_shape, m, k, with_bias=True):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((m, x_shape[1], k, k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32) if with_bias else None
    return x, w, bias


TF32_BOUND = 2.0**-10
"""tf32's promise: within 2^-10 of sum |w x| per output (two operands rounded to 10-bit
mantissas, 2^-11 each, and float32 sums)."""


def assert_within_method_bound(method: str, y, x, w, bias, stride: int, padding: int) -> None:
    """y against the float64 reference: TOLERANCE of the largest magnitude for the float32
    methods (and tf32 where its patch overflows shared memory and tiled runs); for tf32,
    TF32_BOUND of sum |w x| at each output."""
    assert not np.isnan(y).any(), "outputs left unwritten"
    expected = nn.conv2d_reference(x, w, bias, stride=stride, padding=padding)
    if method != "tf32" or \
            tf32_defines(conv2d_shape(x.shape, w.shape, None, stride, padding)) is None:
        assert relative_error(y, expected) < TOLERANCE
        return
    magnitude = nn.conv2d_reference(np.abs(x), np.abs(w), None, stride=stride, padding=padding)
    excess = np.abs(y - expected) - TF32_BOUND * magnitude - 1e-6 * np.abs(expected)
    assert excess.max() <= 0, f"tf32 beyond its bound by {excess.max()} at {np.unravel_index(excess.argmax(), y.shape)}"
    assert relative_error(y, expected) > 1e-6 or magnitude.max() == 0  # it did round: not float32


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("x_shape,mk,stride,padding", CASES)
def test_conv2d_matches_reference(rng, method, x_shape, mk, stride, padding):
    x, w, bias = random_case(rng, x_shape, *mk)
    y = poisoned_conv2d(method, x, w, bias, stride, padding)
    assert_within_method_bound(method, y, x, w, bias, stride, padding)


def test_tiled_falls_back_where_shared_memory_overflows(rng):
    """K = 31 at stride 3 does not fit the tiled kernel: it runs im2col and still gives the
    reference."""
    x, w, bias = random_case(rng, (1, 2, 70, 70), 64, 31)
    assert tiled_defines(conv2d_shape(x.shape, w.shape, None, 3, 0)) is None
    y = poisoned_conv2d("tiled", x, w, bias, 3, 0)
    assert relative_error(y, nn.conv2d_reference(x, w, bias, stride=3)) < TOLERANCE


def test_tf32_falls_back_where_shared_memory_overflows(rng):
    """K = 31 overflows the tf32 kernel's patch: tiled runs it, in float32."""
    x, w, bias = random_case(rng, (1, 2, 40, 40), 4, 31)
    shape = conv2d_shape(x.shape, w.shape, None, 1, 15)
    assert tf32_defines(shape) is None and \
        tf32_defines(conv2d_shape(x.shape, w[:, :, :7, :7].shape, None, 1, 3))
    y = poisoned_conv2d("tf32", x, w, bias, 1, 15)
    assert relative_error(y, nn.conv2d_reference(x, w, bias, padding=15)) < TOLERANCE


def test_im2col_in_chunks(rng):
    """A workspace of a few columns splits every image into many im2col + GEMM rounds."""
    x, w, bias = random_case(rng, (2, 6, 30, 47), 9, 3)
    y = poisoned_conv2d("im2col", x, w, bias, 1, 1, workspace_bytes=6 * 9 * 4 * 300)  # 256 columns
    assert relative_error(y, nn.conv2d_reference(x, w, bias, padding=1)) < TOLERANCE


@pytest.mark.parametrize("method", METHODS)
def test_full_hd_frame(rng, method):
    """A 1080p RGB frame through a 3 -> 8 layer, without bias."""
    x, w, _ = random_case(rng, (1, 3, 1080, 1920), 8, 3, with_bias=False)
    y = poisoned_conv2d(method, x, w, None, 1, 1)
    assert_within_method_bound(method, y, x, w, None, 1, 1)


def test_public_api_on_host_and_device_arrays(rng):
    x, w, bias = random_case(rng, (2, 5, 19, 23), 7, 3)
    expected = nn.conv2d_reference(x, w, bias, padding=1)
    on_host = nn.conv2d(x, w, bias, padding=1, backend="cuda")
    assert isinstance(on_host, np.ndarray) and relative_error(on_host, expected) < TOLERANCE
    gpu = engine()
    with gpu.activated():  # the caller's current context: device arrays in, DeviceFrames out
        y = nn.conv2d(device_array(gpu, x), w, bias, padding=1)
        assert isinstance(y, DeviceFrame) and y.shape == expected.shape and y.dtype == np.float32
        pooled = nn.max_pool2d(nn.relu(y), 2)  # DeviceFrames in (the interface), DeviceFrames out
        assert isinstance(pooled, DeviceFrame)
        result = pooled.get()
    reference = nn.max_pool2d_reference(nn.relu_reference(expected), 2)
    assert relative_error(result, reference) < TOLERANCE


def test_relu_and_max_pool_match_reference(rng):
    x = rng.standard_normal((2, 3, 37, 51)).astype(np.float32)
    gpu = engine()
    with gpu.activated():
        x_d = gpu.to_device(x)
        y = gpu.to_device(np.full(x.shape, np.nan, np.float32))
        gpu.relu_into(y, x_d)
        assert np.array_equal(gpu.to_host(y), nn.relu_reference(x).astype(np.float32))
        for kernel, stride in ((2, 2), (3, 2), (3, 1), (37, 5)):
            shape = nn.pool_shape(x.shape, kernel, stride)
            pooled = gpu.to_device(np.full(shape, np.nan, np.float32))
            gpu.max_pool2d_into(pooled, x_d, kernel, stride)
            want = nn.max_pool2d_reference(x, kernel, stride).astype(np.float32)
            assert np.array_equal(gpu.to_host(pooled), want)


def test_device_array_dtype_checked():
    gpu = engine()
    with gpu.activated():
        x = device_array(gpu, np.zeros((1, 1, 4, 4), np.float64))
        refused = "expected a C-contiguous float32 device array, got float64"
        with pytest.raises(ShapeError, match=refused):
            nn.conv2d(x, np.ones((1, 1, 3, 3), np.float32))
