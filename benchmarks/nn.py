"""Convolution-layer benchmark of streamconv.nn on the GPU: checks correctness, then times.

    python benchmarks/nn.py [--json PATH] [--quick] [--methods direct,tiled,im2col,tf32]

For C in {3, 16, 64} input channels, M in {8, 64} output channels, K in {3, 5, 7}, batch N in
{1, 8}, at 1080p (stride 1, padding K // 2, so the output is 1080p too), each conv2d method is:
1. checked: the output is poisoned (NaN) first, then 4096 random outputs are held against the
   float64 definition computed for just those outputs (relative error, at most 1e-4; ``tf32``,
   TF32 operands on the tensor cores: within 2^-10 of sum |w x| at each), on fresh uniform
   random inputs in [-1, 1);
2. timed with CUDA events after a warm-up (median of several runs), the taps already in the
   kernels' layout (a once-per-model cost, like any library's weight transform);
3. reported as ms, GFLOP/s (2 N M Ho Wo C K K per call) and the fraction of the FP32 peak
   (SMs x FP32 lanes x boost clock x 2). im2col also shows its expansion ratio (K^2 Ho Wo / H W).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402

import benchinfo  # noqa: E402
from streamconv.gpu import loader as kernel_loader  # noqa: E402
from streamconv.bench.timing import fp32_fma_peak, occupancy  # noqa: E402
from streamconv.nn import conv2d_shape, im2col_expansion  # noqa: E402
from streamconv.nn.gpu import (METHODS, engine, gemm_defines, gemm_threads, tf32_defines, tiled_defines,  # noqa: E402
                               tiled_threads)

HEIGHT, WIDTH = 1080, 1920
CHANNELS = (3, 16, 64)
OUTPUTS = (8, 64)
KS = (3, 5, 7)
BATCHES = (1, 8)
CHECK_POINTS = 4096
TOLERANCE = 1e-4
TF32_BOUND = 2.0**-10  # tf32's promise, per output, relative to sum |w x| (streamconv.nn.gpu.METHODS)
TIME_BUDGET_S = 1.0


def reference_at(x: np.ndarray, w: np.ndarray, bias: np.ndarray, shape, picks) -> np.ndarray:
    """The float64 definition at output positions ``picks`` = (n, m, i, j) index arrays."""
    n, m, i, j = picks
    offsets = np.arange(shape.k)
    rows = i[:, None] * shape.stride - shape.padding + offsets  # P x K
    cols = j[:, None] * shape.stride - shape.padding + offsets
    inside = ((rows >= 0) & (rows < shape.h))[:, :, None] & ((cols >= 0) & (cols < shape.w))[:, None, :]
    windows = x[n[:, None, None, None], np.arange(shape.c)[None, :, None, None],
                np.clip(rows, 0, shape.h - 1)[:, None, :, None], np.clip(cols, 0, shape.w - 1)[:, None, None, :]]
    windows = windows.astype(np.float64) * inside[:, None]
    return np.einsum("pckl,pckl->p", windows, w[m].astype(np.float64)) + bias[m]


def check(y_host: np.ndarray, x: np.ndarray, w: np.ndarray, bias: np.ndarray, shape, rng,
          method: str) -> float:
    """Relative error of sampled outputs against the definition; raises if NaN or above the
    method's bound (TOLERANCE; for tf32, TF32_BOUND of sum |w x| at each output)."""
    if np.isnan(y_host).any():
        raise SystemExit("outputs left unwritten (NaN poison survived)")
    picks = tuple(rng.integers(0, size, CHECK_POINTS) for size in shape.out_shape)
    expected = reference_at(x, w, bias, shape, picks)
    difference = np.abs(y_host[picks] - expected)
    error = float(np.max(difference) / np.max(np.abs(expected)))
    if method == "tf32":
        magnitude = reference_at(np.abs(x), np.abs(w), np.zeros_like(bias), shape, picks)
        if np.any(difference > TF32_BOUND * magnitude + 1e-6 * np.abs(expected)):
            raise SystemExit(f"tf32 beyond 2^-10 of sum |w x| (relative error {error:.2e})")
    elif error > TOLERANCE:
        raise SystemExit(f"relative error {error:.2e} > {TOLERANCE:g}")
    return error


def time_call(function, cuda, *, budget_s: float = TIME_BUDGET_S) -> float:
    """Median seconds of ``function()`` (queued GPU work) over event-timed runs, after a warm-up;
    ``cuda``: the CUDA binding."""
    start, end = cuda.event(), cuda.event()
    start.record()
    function()
    end.record()
    end.synchronize()
    first = end.time_since(start) / 1e3
    samples = []
    for _ in range(max(3, min(20, int(budget_s / max(first, 1e-6))))):
        start.record()
        function()
        end.record()
        end.synchronize()
        samples.append(end.time_since(start) / 1e3)
    return statistics.median(samples)


def kernel_facts(gpu, method: str, shape, device) -> dict:
    """Registers, shared memory and occupancy of the method's main kernel."""
    if method == "direct":
        function, threads = gpu.function("nn_conv", "conv_direct", {"DIRECT_TILE": 16}), 256
    elif method == "tf32":
        function, threads = gpu.function("conv_tf32", "conv_tf32", tf32_defines(shape)), 256
    elif method == "tiled" and tiled_defines(shape) is not None:
        d = tiled_defines(shape)
        function, threads = gpu.function("nn_conv", "conv_tiled", d), tiled_threads(d)
    else:
        d = gemm_defines(shape.m)
        function, threads = gpu.function("gemm", "sgemm_bias", d), gemm_threads(d)
    fraction, limit = occupancy(device, function, threads)
    return {"registers": function.attribute("num_regs"),
            "shared_bytes": function.attribute("shared_size_bytes"),
            "occupancy": fraction, "occupancy_limit": limit}


def precompile(shapes, arch: str) -> None:
    wanted = {("nn_conv", (("DIRECT_TILE", 16),)), ("nn_conv", ()), ("nn_ops", ())}
    for shape in shapes:
        defines = tiled_defines(shape)
        if defines:
            wanted.add(("nn_conv", tuple(sorted(defines.items()))))
        wanted.add(("gemm", tuple(sorted(gemm_defines(shape.m).items()))))
        wanted.add(("conv_tf32", tuple(sorted(tf32_defines(shape).items()))))
    kernel_loader.precompile([(name, dict(items)) for name, items in sorted(wanted)], arch, workers=16)


def measure(gpu, shape, methods, rng, device, peak_flops: float) -> list[dict]:
    """Check, then time, every method on one shape; fresh random inputs."""
    x_host = rng.uniform(-1, 1, (shape.n, shape.c, shape.h, shape.w)).astype(np.float32)
    w_host = rng.uniform(-1, 1, (shape.m, shape.c, shape.k, shape.k)).astype(np.float32)
    bias_host = rng.uniform(-1, 1, shape.m).astype(np.float32)
    x, w, bias = gpu.to_device(x_host), gpu.to_device(w_host), gpu.to_device(bias_host)
    w_t = gpu.transpose_taps(w)
    y = gpu.empty(shape.out_shape)
    nan = np.full(shape.out_shape, np.nan, np.float32)
    rows = []
    for method in methods:
        gpu.gpu.copy_htod(y.address, nan)  # poisoned

        def call(method=method):
            gpu.conv2d_into(y, x, w, bias, shape, method=method, w_t=w_t)

        call()
        error = check(gpu.to_host(y), x_host, w_host, bias_host, shape, rng, method)
        seconds = time_call(call, gpu.gpu)
        row = {"n": shape.n, "c": shape.c, "m": shape.m, "k": shape.k, "method": method,
               "ms": seconds * 1e3, "gflops": shape.flops / seconds / 1e9,
               "peak_fraction": shape.flops / seconds / peak_flops, "max_rel_error": error,
               "expansion": im2col_expansion(shape) if method == "im2col" else None,
               **kernel_facts(gpu, method, shape, device)}
        rows.append(row)
        print(format_row(row), flush=True)
    return rows


def run(methods, channels, outputs, ks, batches) -> dict:
    rng = np.random.default_rng()
    gpu = engine(0)
    rows = []
    with gpu.activated():
        device = gpu.gpu.current_device()
        peak_flops = 2 * fp32_fma_peak(device)
        shapes = [conv2d_shape((n, c, HEIGHT, WIDTH), (m, c, k, k), (m,), 1, k // 2)
                  for n in batches for c in channels for m in outputs for k in ks]
        precompile(shapes, gpu.arch)
        for shape in shapes:
            rows += measure(gpu, shape, methods, rng, device, peak_flops)
        version = gpu.gpu.driver_version()
        return {"gpu": device.name, "binding": gpu.gpu.describe(),
                "driver_cuda": f"{version // 1000}.{version % 1000 // 10}",
                "fp32_peak_gflops": peak_flops / 1e9, "size": f"{WIDTH}x{HEIGHT}", "stride": 1,
                "padding": "K // 2", "streamconv": streamconv.__version__, "commit": benchinfo.commit(),
                "python": platform.python_version(), "numpy": np.__version__, "rows": rows}


HEADER = f"{'N':>2} {'C':>3} {'M':>3} {'K':>2} {'method':<7} {'ms':>9} {'GFLOP/s':>9} {'peak':>6} " \
         f"{'regs':>4} {'occ':>5} {'expand':>6} {'rel err':>8}"


def format_row(row: dict) -> str:
    expansion = f"{row['expansion']:.1f}x" if row["expansion"] else "-"
    return (f"{row['n']:>2} {row['c']:>3} {row['m']:>3} {row['k']:>2} {row['method']:<7} {row['ms']:>9.3f} "
            f"{row['gflops']:>9.0f} {row['peak_fraction']:>6.1%} {row['registers']:>4} "
            f"{row['occupancy']:>5.0%} {expansion:>6} {row['max_rel_error']:>8.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="only C = M = 64, K = 3, batch 1")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of "
                        + ", ".join(METHODS))
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown method {unknown[0]!r}; known: {', '.join(METHODS)}")
    needs.gpu()
    grid = ((64,), (64,), (3,), (1,)) if args.quick else (CHANNELS, OUTPUTS, KS, BATCHES)
    print(HEADER)
    result = run(methods, *grid)
    print(f"{result['gpu']}, FP32 peak {result['fp32_peak_gflops']:.0f} GFLOP/s, commit {result['commit']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.exit(needs.run(main))
