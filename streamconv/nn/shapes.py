"""Shape checks of the convolution-layer operators; errors show the actual and expected shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ShapeError

MAX_KERNEL = 31
"""Largest kernel side the layers accept (the tiled kernel unrolls its taps)."""


@dataclass(frozen=True)
class ConvShape:
    """The sizes of one conv2d call: x is N x C x H x W, w is M x C x K x K, y is N x M x Ho x
    Wo."""

    n: int
    c: int
    h: int
    w: int
    m: int
    k: int
    stride: int
    padding: int

    @property
    def out_h(self) -> int:
        return (self.h + 2 * self.padding - self.k) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.w + 2 * self.padding - self.k) // self.stride + 1

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.m, self.out_h, self.out_w)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as two operations: 2 N M Ho Wo C K K."""
        return 2 * self.n * self.m * self.out_h * self.out_w * self.c * self.k * self.k


def _positive_int(value: Any, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ShapeError(f"{what} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise ShapeError(f"{what} must be >= {minimum}, got {number}")
    return number


def conv2d_shape(x_shape: tuple, w_shape: tuple, bias_shape: tuple | None, stride: Any,
                 padding: Any) -> ConvShape:
    """Check the shapes of a conv2d call and return its sizes.

    Args:
        x_shape: (N, C, H, W). w_shape: (M, C, K, K). bias_shape: (M,) or None.
        stride: a positive int. padding: an int >= 0 (zeros on every side).

    Raises:
        ShapeError: the message names the argument, its shape and the expected one.
    """
    stride = _positive_int(stride, "conv2d: stride", minimum=1)
    padding = _positive_int(padding, "conv2d: padding", minimum=0)
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if len(x_shape) != 4:
        raise ShapeError(f"conv2d: x has shape {x_shape}, expected (N, C, H, W)")
    n, c, h, w = x_shape
    if min(x_shape) < 1:
        raise ShapeError(f"conv2d: x has shape {x_shape}, an empty dimension")
    if len(w_shape) != 4 or w_shape[1] != c or w_shape[2] != w_shape[3]:
        raise ShapeError(f"conv2d: w has shape {w_shape}, expected (M, {c}, K, K) for x of shape "
                         f"{x_shape}")
    m, _, k, _ = w_shape
    if m < 1 or k < 1:
        raise ShapeError(f"conv2d: w has shape {w_shape}, an empty dimension")
    if k > MAX_KERNEL:
        raise ShapeError(f"conv2d: w has shape {w_shape}: K = {k} > {MAX_KERNEL}")
    if bias_shape is not None and tuple(bias_shape) != (m,):
        raise ShapeError(f"conv2d: bias has shape {tuple(bias_shape)}, expected ({m},)")
    if h + 2 * padding < k or w + 2 * padding < k:
        raise ShapeError(f"conv2d: the padded input ({h + 2 * padding} x {w + 2 * padding}) is "
                         "smaller "
                         f"than the kernel ({k} x {k})")
    return ConvShape(n, c, h, w, m, k, stride, padding)


def pool_shape(x_shape: tuple, kernel: Any, stride: Any) -> tuple[int, int, int, int]:
    """The output shape of ``max_pool2d`` on an (N, C, H, W) tensor (floor mode, no padding).

    Raises:
        ShapeError: not 4-D, a bad kernel or stride, or a window larger than the input.
    """
    kernel = _positive_int(kernel, "max_pool2d: kernel", minimum=1)
    stride = _positive_int(stride, "max_pool2d: stride", minimum=1)
    x_shape = tuple(x_shape)
    if len(x_shape) != 4 or min(x_shape) < 1:
        raise ShapeError(f"max_pool2d: x has shape {x_shape}, expected (N, C, H, W), none empty")
    n, c, h, w = x_shape
    if h < kernel or w < kernel:
        raise ShapeError(f"max_pool2d: x has shape {x_shape}, smaller than the {kernel} x {kernel} "
                         "window")
    return (n, c, (h - kernel) // stride + 1, (w - kernel) // stride + 1)
