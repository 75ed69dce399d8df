"""NumPy references of the layers, in float64: the oracle the GPU implementations are checked
against.

Each is the definition written out directly, with no blocking or reordering to trust.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .shapes import conv2d_shape, pool_shape


def conv2d_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *,
                     stride: int = 1, padding: int = 0) -> np.ndarray:
    """y[n,m,i,j] = bias[m] + sum_{c,p,q} w[m,c,p,q] x[n,c,i*stride+p-padding, j*stride+q-padding].

    Args:
        x: N x C x H x W host array. w: M x C x K x K host array. bias: (M,) host array or None.

    Returns:
        N x M x Ho x Wo float64 host array; reads outside x are zeros.
    """
    shape = conv2d_shape(np.shape(x), np.shape(w), None if bias is None else np.shape(bias), stride,
                         padding)
    p = shape.padding
    padded = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    windows = sliding_window_view(padded, (shape.k, shape.k), axis=(2, 3))  # N C H' W' K K
    windows = windows[:, :, ::shape.stride, ::shape.stride][:, :, : shape.out_h, : shape.out_w]
    y = np.einsum("nchwpq,mcpq->nmhw", windows, np.asarray(w, np.float64), optimize=True)
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None, None]
    return y


def relu_reference(x: np.ndarray) -> np.ndarray:
    """max(x, 0) element-wise, float64 host array of x's shape."""
    return np.maximum(np.asarray(x, np.float64), 0.0)


def max_pool2d_reference(x: np.ndarray, kernel: int, stride: int | None = None) -> np.ndarray:
    """The maximum over each kernel x kernel window at steps of ``stride`` (default ``kernel``).

    Args:
        x: N x C x H x W host array.

    Returns:
        N x C x Ho x Wo float64 host array, Ho = (H - kernel) // stride + 1 (windows inside x only).
    """
    stride = kernel if stride is None else stride
    _, _, out_h, out_w = pool_shape(np.shape(x), kernel, stride)
    windows = sliding_window_view(np.asarray(x, np.float64), (kernel, kernel), axis=(2, 3))
    return windows[:, :, ::stride, ::stride].max(axis=(4, 5))[:, :, :out_h, :out_w]
