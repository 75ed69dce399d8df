"""streamconv.nn on the CPU: the float64 references against the definition, the float32 fallback
against the references, and the shape errors."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv import nn
from streamconv.errors import ShapeError
from streamconv.nn.shapes import conv2d_shape

from helpers.nn import TOLERANCE, relative_error

def conv2d_by_loops(x, w, bias, stride, padding):
    """The definition, one output at a time (tiny shapes only)."""
    n_count, channels, height, width = x.shape
    m_count, _, k, _ = w.shape
    out_h = (height + 2 * padding - k) // stride + 1
    out_w = (width + 2 * padding - k) // stride + 1
    y = np.zeros((n_count, m_count, out_h, out_w))
    for n in range(n_count):
        for m in range(m_count):
            for i in range(out_h):
                for j in range(out_w):
                    total = 0.0 if bias is None else float(bias[m])
                    for c in range(channels):
                        for p in range(k):
                            for q in range(k):
                                row, col = i * stride + p - padding, j * stride + q - padding
                                if 0 <= row < height and 0 <= col < width:
                                    total += float(x[n, c, row, col]) * float(w[m, c, p, q])
                    y[n, m, i, j] = total
    return y


def test_conv2d_known_values():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.array([[[[0, 1, 0], [1, 1, 1], [0, 1, 0]]]], dtype=np.float32)  # a plus sign
    y = nn.conv2d_reference(x, w, np.array([0.5]), padding=1)
    assert y[0, 0, 0, 0] == 0 + 1 + 4 + 0.5  # corner: the centre, right and below
    assert y[0, 0, 1, 1] == 5 + 1 + 4 + 6 + 9 + 0.5


@pytest.mark.parametrize("stride,padding,k",
                         [(1, 0, 3), (1, 1, 3), (2, 1, 3), (3, 2, 5), (1, 0, 1), (2, 0, 2)])
def test_reference_matches_definition(rng, stride, padding, k):
    x = rng.standard_normal((2, 3, 9, 11))
    w = rng.standard_normal((4, 3, k, k))
    bias = rng.standard_normal(4)
    expected = conv2d_by_loops(x, w, bias, stride, padding)
    np.testing.assert_allclose(nn.conv2d_reference(x, w, bias, stride=stride, padding=padding),
                               expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride,padding,k", [(1, 1, 3), (2, 2, 5), (1, 0, 7), (3, 1, 3)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_cpu_conv2d_matches_reference(rng, stride, padding, k, with_bias):
    x = rng.standard_normal((2, 5, 31, 45)).astype(np.float32)
    w = rng.standard_normal((6, 5, k, k)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32) if with_bias else None
    y = nn.conv2d(x, w, bias, stride=stride, padding=padding, backend="cpu")
    assert y.dtype == np.float32
    expected = nn.conv2d_reference(x, w, bias, stride=stride, padding=padding)
    assert relative_error(y, expected) < TOLERANCE


def test_cpu_conv2d_in_bands(rng, monkeypatch):
    """A frame taller than one band of unrolled columns is stitched from its bands correctly."""
    from streamconv.nn import cpu

    x = rng.standard_normal((2, 4, 40, 30)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    monkeypatch.setattr(cpu, "_BAND_BYTES", 4 * 36 * 30 * 7)  # 7 output rows per band, the last 5
    banded = nn.conv2d(x, w, padding=1, backend="cpu")
    assert relative_error(banded, nn.conv2d_reference(x, w, padding=1)) < TOLERANCE


def test_cpu_converts_host_dtypes(rng):
    x = rng.integers(0, 255, (1, 3, 8, 8), dtype=np.uint8)
    w = np.ones((1, 3, 1, 1))
    assert np.array_equal(nn.conv2d(x, w, backend="cpu")[0, 0], x.sum(axis=1).astype(np.float32)[0])


def test_relu_and_pool_match_reference(rng):
    x = rng.standard_normal((2, 3, 13, 17)).astype(np.float32)
    assert np.array_equal(nn.relu(x, backend="cpu"), nn.relu_reference(x).astype(np.float32))
    for kernel, stride in ((2, None), (3, 2), (3, 1), (13, 4)):
        pooled = nn.max_pool2d(x, kernel, stride, backend="cpu")
        assert np.array_equal(pooled, nn.max_pool2d_reference(x, kernel, stride).astype(np.float32))
    assert nn.max_pool2d(x, 2, backend="cpu").shape == (2, 3, 6, 8)
    assert nn.max_pool2d(x, 3, 2, backend="cpu").shape == (2, 3, 6, 8)


def test_pool_known_values():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert nn.max_pool2d(x, 2, backend="cpu")[0, 0].tolist() == [[5, 7], [13, 15]]


@pytest.mark.parametrize("x_shape,w_shape,bias_shape,message", [
    ((3, 8, 8), (4, 3, 3, 3), None, "x has shape (3, 8, 8), expected (N, C, H, W)"),
    ((1, 3, 8, 8), (4, 2, 3, 3), None, "w has shape (4, 2, 3, 3), expected (M, 3, K, K)"),
    ((1, 3, 8, 8), (4, 3, 3, 5), None, "w has shape (4, 3, 3, 5), expected (M, 3, K, K)"),
    ((1, 3, 8, 8), (4, 3, 3, 3), (3,), "bias has shape (3,), expected (4,)"),
    ((1, 3, 2, 8), (4, 3, 3, 3), None, "padded input (2 x 8) is smaller than the kernel (3 x 3)"),
    ((0, 3, 8, 8), (4, 3, 3, 3), None, "an empty dimension"),
    ((1, 3, 40, 40), (1, 3, 33, 33), None, "K = 33 > 31"),
])
def test_conv2d_shape_errors(x_shape, w_shape, bias_shape, message):
    x, w = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)
    bias = None if bias_shape is None else np.zeros(bias_shape, np.float32)
    with pytest.raises(ShapeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        nn.conv2d(x, w, bias, backend="cpu")


@pytest.mark.parametrize("stride,padding,message", [(0, 0, "stride must be >= 1, got 0"),
                                                    (1, -1,
                                                     "padding must be >= 1|padding must be >= 0"),
                                                    (1.5, 0, "stride must be an integer"),
                                                    (True, 0, "stride must be an integer")])
def test_conv2d_argument_errors(stride, padding, message):
    with pytest.raises(ShapeError, match=message):
        conv2d_shape((1, 1, 4, 4), (1, 1, 3, 3), None, stride, padding)


def test_bad_method_backend_and_dtype():
    x, w = np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 3))
    with pytest.raises(ShapeError, match="unknown method 'winograd'"):
        nn.conv2d(x, w, method="winograd", backend="cpu")
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        nn.conv2d(x, w, backend="tpu")
    with pytest.raises(ShapeError, match="dtype <U1 is not a real number type"):
        nn.conv2d(np.full((1, 1, 4, 4), "a"), w, backend="cpu")
    with pytest.raises(ShapeError, match="smaller than the 5 x 5 window"):
        nn.max_pool2d(np.zeros((1, 1, 4, 4)), 5, backend="cpu")


def test_output_size_and_flops():
    shape = conv2d_shape((8, 64, 1080, 1920), (64, 64, 3, 3), (64,), 1, 1)
    assert shape.out_shape == (8, 64, 1080, 1920)
    assert shape.flops == 2 * 8 * 64 * 1080 * 1920 * 64 * 9
    assert nn.im2col_expansion(shape) == 9.0
    strided = conv2d_shape((1, 3, 1080, 1920), (8, 3, 5, 5), None, 2, 0)
    assert strided.out_shape == (1, 8, 538, 958)
