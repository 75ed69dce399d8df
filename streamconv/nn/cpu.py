"""The CPU fallback of the layers: float32 im2col + BLAS matrix product, in bands of output rows."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .shapes import ConvShape, pool_shape

# Bytes of unrolled columns per band: large enough for BLAS to run at speed, small enough for cache.
_BAND_BYTES = 32 << 20


def conv2d_cpu(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
               shape: ConvShape) -> np.ndarray:
    """conv2d in float32 on the host.

    Args:
        x: N x C x H x W float32 host array. w: M x C x K x K float32. bias: (M,) float32 or None.
        shape: the checked sizes (:func:`streamconv.nn.shapes.conv2d_shape`).

    Returns:
        N x M x Ho x Wo float32 host array.
    """
    k, s, p = shape.k, shape.stride, shape.padding
    y = np.empty(shape.out_shape, np.float32)
    taps = w.reshape(shape.m, -1)
    column_bytes = shape.c * k * k * 4
    band = max(1, _BAND_BYTES // max(1, column_bytes * shape.out_w))
    for n in range(shape.n):
        padded = np.pad(x[n], ((0, 0), (p, p), (p, p)))
        windows = sliding_window_view(padded, (k, k), axis=(1, 2))[:, ::s, ::s]  # C Ho' Wo' K K
        for top in range(0, shape.out_h, band):
            rows = windows[:, top: min(top + band, shape.out_h), : shape.out_w]
            columns = np.ascontiguousarray(rows.transpose(0, 3, 4, 1, 2)).reshape(taps.shape[1], -1)
            y[n, :, top: top + rows.shape[1]] = (taps @ columns).reshape(shape.m, rows.shape[1], -1)
    if bias is not None:
        y += bias[None, :, None, None]
    return y


def relu_cpu(x: np.ndarray) -> np.ndarray:
    """max(x, 0) element-wise: float32 host array of x's shape."""
    return np.maximum(x, np.float32(0))


def max_pool2d_cpu(x: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """Max over kernel x kernel windows at steps of stride: N x C x Ho x Wo float32 host array."""
    _, _, out_h, out_w = pool_shape(x.shape, kernel, stride)
    windows = sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.ascontiguousarray(windows[:, :, :out_h, :out_w].max(axis=(4, 5)))
