"""streamconv.nn on the GPU: every conv2d method, relu and max_pool2d against the float64 references,
on fresh random data, with every output poisoned (NaN) before the kernels run."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv import nn
from streamconv.errors import ShapeError
from streamconv.nn.gpu import METHODS, engine, tiled_defines
from streamconv.nn.shapes import conv2d_shape

from test_nn import TOLERANCE, relative_error

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
    from pycuda import gpuarray

    shape = conv2d_shape(x.shape, w.shape, None if bias is None else bias.shape, stride, padding)
    gpu = engine()
    with gpu.activated():
        y = gpuarray.to_gpu(np.full(shape.out_shape, np.nan, np.float32))
        bias_d = None if bias is None else gpuarray.to_gpu(bias)
        gpu.conv2d_into(y, gpuarray.to_gpu(x), gpuarray.to_gpu(w), bias_d, shape, method=method, **options)
        return y.get()


def random_case(rng, x_shape, m, k, with_bias=True):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((m, x_shape[1], k, k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32) if with_bias else None
    return x, w, bias


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("x_shape,mk,stride,padding", CASES)
def test_conv2d_matches_reference(rng, method, x_shape, mk, stride, padding):
    x, w, bias = random_case(rng, x_shape, *mk)
    y = poisoned_conv2d(method, x, w, bias, stride, padding)
    assert not np.isnan(y).any(), "outputs left unwritten"
    assert relative_error(y, nn.conv2d_reference(x, w, bias, stride=stride, padding=padding)) < TOLERANCE


def test_tiled_falls_back_where_shared_memory_overflows(rng):
    """K = 31 at stride 3 does not fit the tiled kernel: it runs im2col and still gives the reference."""
    x, w, bias = random_case(rng, (1, 2, 70, 70), 64, 31)
    assert tiled_defines(conv2d_shape(x.shape, w.shape, None, 3, 0)) is None
    y = poisoned_conv2d("tiled", x, w, bias, 3, 0)
    assert relative_error(y, nn.conv2d_reference(x, w, bias, stride=3)) < TOLERANCE


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
    assert relative_error(y, nn.conv2d_reference(x, w, padding=1)) < TOLERANCE


def test_public_api_on_host_and_device_arrays(rng):
    from pycuda import gpuarray

    x, w, bias = random_case(rng, (2, 5, 19, 23), 7, 3)
    expected = nn.conv2d_reference(x, w, bias, padding=1)
    on_host = nn.conv2d(x, w, bias, padding=1, backend="cuda")
    assert isinstance(on_host, np.ndarray) and relative_error(on_host, expected) < TOLERANCE
    gpu = engine()
    with gpu.activated():  # the caller's current context: GPUArrays in, a GPUArray out
        y = nn.conv2d(gpuarray.to_gpu(x), w, bias, padding=1)
        assert isinstance(y, gpuarray.GPUArray)
        pooled = nn.max_pool2d(nn.relu(y), 2)
        result = pooled.get()
    reference = nn.max_pool2d_reference(nn.relu_reference(expected), 2)
    assert relative_error(result, reference) < TOLERANCE


def test_relu_and_max_pool_match_reference(rng):
    from pycuda import gpuarray

    x = rng.standard_normal((2, 3, 37, 51)).astype(np.float32)
    gpu = engine()
    with gpu.activated():
        x_d = gpuarray.to_gpu(x)
        y = gpuarray.to_gpu(np.full(x.shape, np.nan, np.float32))
        gpu.relu_into(y, x_d)
        assert np.array_equal(y.get(), nn.relu_reference(x).astype(np.float32))
        for kernel, stride in ((2, 2), (3, 2), (3, 1), (37, 5)):
            shape = nn.pool_shape(x.shape, kernel, stride)
            pooled = gpuarray.to_gpu(np.full(shape, np.nan, np.float32))
            gpu.max_pool2d_into(pooled, x_d, kernel, stride)
            assert np.array_equal(pooled.get(), nn.max_pool2d_reference(x, kernel, stride).astype(np.float32))


def test_device_array_dtype_checked():
    from pycuda import gpuarray

    gpu = engine()
    with gpu.activated():
        x = gpuarray.to_gpu(np.zeros((1, 1, 4, 4), np.float64))
        with pytest.raises(ShapeError, match="expected a C-contiguous float32 GPUArray, got float64"):
            nn.conv2d(x, np.ones((1, 1, 3, 3), np.float32))
