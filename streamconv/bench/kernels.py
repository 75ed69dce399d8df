"""``streamconv bench``: every CUDA kernel variant x K x frame size, beside OpenCV on the host.

For each frame size and K it makes random RGB frames and two filters: random float taps (what the 2D
variants are timed on) and a Gaussian (rank 1, what ``separable`` is timed on; ``auto`` is timed on
both). Each variant is first checked against the CPU backend on a fresh random frame with its output
buffers poisoned, then timed with CUDA events after a warm-up, rotating over four device frames so
4K frames do not sit in L2: one frame after another on one stream, and dealt over two streams as the
pipeline's slots queue them. Host references are ``cv2.filter2D`` (random taps) and
``cv2.sepFilter2D`` (the Gaussian) on the same frame.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import cv2
import numpy as np

from .. import __version__
from ..backends import plan
from ..backends.cpu.backend import CpuBackend
from ..backends.cuda.backend import CudaBackend
from ..frames.borders import BORDER_CODES, CV_BORDERS, DEFAULT_BORDER
from ..errors import StreamError
from ..chain.filters import FilterStage, gaussian_taps_1d, validate_taps
from .timing import (copy_bandwidth, fp32_fma_peak, int8_tensor_peak, occupancy, poisoned_run,
                     time_host, time_launches)

SIZES = {"1080p": (1080, 1920), "4k": (2160, 3840)}
DEFAULT_KS = (3, 5, 7, 9, 15, 31)
ROTATE = 4  # device frames cycled through while timing (4 x 25 MB at 4K > the H100's 50 MB L2)


@dataclass
class BenchRow:
    """One timed configuration; times in ms, bandwidth in GB/s (bytes read + written)."""

    size: str
    k: int
    # a variant name, "auto", or a host reference "cv2.filter2D" / "cv2.sepFilter2D"
    variant: str
    taps: str         # "random" or "gaussian"
    ms: float
    gbps: float
    copy_fraction: float  # of the device-to-device copy bandwidth
    fma_fraction: float   # useful FMAs per second over the FP32 peak (0 for host rows); for
                          # tensor-core, the int8 tensor products it issues over that peak
    max_lsb: int | None   # largest |GPU - CPU backend| on a fresh frame (None for host rows)
    registers: int = 0
    shared_bytes: int = 0
    spill_bytes: int = 0
    occupancy: float = 0.0
    occupancy_limit: str = ""
    # the variant it ran as; "+offset" where bytes were widened to 2^15 + byte,
    chosen: str = ""
                          # "+tensor" for separable taps run on the tensor cores (sepconv_tc.cu)
    math_unit: str = "FP32"  # the roofline fma_fraction is of: "FP32" or "tensor" (int8)
    two_stream_ms: float = 0.0  # ms per frame with frames dealt over two streams, as the pipeline's
                                # slots queue them (one frame's kernels start as the last one's end)

    @property
    def limiter(self) -> str:
        """The nearer roofline: ``memory``, ``FP32`` or ``tensor``."""
        return "memory" if self.copy_fraction >= self.fma_fraction else self.math_unit


TAPS_SEED = 0
"""The random taps are the same in every run, so that runs compare: a draw decides which kernel
runs them (K=9's need 2 int8 digits for the tensor cores about half the time, else 3)."""


def random_taps(rng: np.random.Generator, size: int) -> FilterStage:
    """A K x K stage of random float taps around an identity (full rank)."""
    taps = rng.normal(0, 1, (size, size)) / size
    taps[size // 2, size // 2] += 1
    return FilterStage("custom", {}, (validate_taps(taps),))


def gaussian(size: int) -> FilterStage:
    """A K x K Gaussian with sigma = K / 6 (rank 1)."""
    weights = gaussian_taps_1d(size / 6.0, size)
    return FilterStage("gaussian", {"size": size}, (validate_taps(np.outer(weights, weights)),))


@dataclass(frozen=True)
class BenchEnv:
    """The device a bench runs on and its rooflines, measured once."""

    gpu: Any  # the CUDA binding
    device: Any
    arch: str
    border: str
    copy_gbps: float
    fma_peak: float
    int8_peak: float

    def peak(self, math_unit: str) -> float:
        """Multiply-adds per second of ``math_unit`` (``FP32`` or ``tensor``)."""
        return self.int8_peak if math_unit == "tensor" else self.fma_peak


@dataclass(frozen=True)
class BenchJob:
    """One configuration to check and time: a frame size, K, which taps, a kernel choice."""

    size: str
    k: int
    taps: str
    kernel: str


def _measure_variant(stage: FilterStage, kernel: str, shape, frame, expected, rng,
                     env: BenchEnv) -> BenchRow:
    with CudaBackend([stage], border=env.border, kernel=kernel) as backend:
        slots = backend.allocate_slots(shape, ROTATE, dtype=frame.dtype)
        got = poisoned_run(backend, slots[0], frame)
        worst = int(np.abs(got.astype(np.int64) - expected.astype(np.int64)).max())
        with backend.activated():
            for slot in slots:
                slot.host_in[:] = rng.integers(0, np.iinfo(frame.dtype).max + 1, shape,
                                               dtype=frame.dtype)
                slot.device.upload(None)  # now, synchronously
            seconds = time_launches(backend, slots)
            two_stream_seconds = time_launches(backend, slots, streams=2)
            launch, compiled = backend.compiled_stages(shape, frame.dtype)[0]
            threads = launch.block[0] * launch.block[1] * launch.block[2]
            occ, limit = occupancy(env.device, compiled, threads)
            registers, shared, spill = (compiled.attribute(name) for name in
                                        ("num_regs", "shared_size_bytes", "local_size_bytes"))
    gbps = 2 * frame.nbytes / seconds / 1e9
    return BenchRow(size="", k=stage.size, variant=kernel, taps="", ms=seconds * 1e3, gbps=gbps,
                    copy_fraction=gbps / env.copy_gbps,
                    fma_fraction=launch.products / seconds / env.peak(launch.math_unit),
                    math_unit=launch.math_unit, max_lsb=worst, registers=registers,
                    shared_bytes=shared,
                    spill_bytes=spill, occupancy=occ, occupancy_limit=limit,
                    chosen=launch.variant + launch.tags, two_stream_ms=two_stream_seconds * 1e3)


def _host_row(size: str, k: int, name: str, taps: str, seconds: float, frame_bytes: int,
              copy_gbps: float) -> BenchRow:
    gbps = 2 * frame_bytes / seconds / 1e9
    return BenchRow(size=size, k=k, variant=name, taps=taps, ms=seconds * 1e3, gbps=gbps,
                    copy_fraction=gbps / copy_gbps, fma_fraction=0.0, max_lsb=None)


def _host_rows(size: str, k: int, frame: np.ndarray, random_stage: FilterStage, border: str,
               copy_gbps: float) -> list[BenchRow]:
    """cv2.filter2D (the random taps) and cv2.sepFilter2D (the Gaussian) on the same host frame."""
    cv_border = CV_BORDERS[border]
    random32 = random_stage.taps[0]
    weights = gaussian_taps_1d(k / 6.0, k).astype(np.float32)
    filter2d = time_host(lambda: cv2.filter2D(frame, -1, random32, borderType=cv_border))
    separable = time_host(lambda: cv2.sepFilter2D(frame, -1, weights, weights,
                                                  borderType=cv_border))
    return [_host_row(size, k, "cv2.filter2D", "random", filter2d, frame.nbytes, copy_gbps),
            _host_row(size, k, "cv2.sepFilter2D", "gaussian", separable, frame.nbytes, copy_gbps)]


def _reference(stage: FilterStage, border: str, frame: np.ndarray) -> np.ndarray:
    """The CPU backend's output for ``frame`` (host, the frame's shape and dtype)."""
    with CpuBackend([stage], border=border) as reference:
        return reference.apply(frame)


def kernels_for_depth(kernels: Sequence[str], depth: int) -> list[str]:
    """The kernel choices among ``kernels`` that run frames of ``depth`` bits (16: those of
    ``plan.DEEP_KERNEL_CHOICES``)."""
    if depth == 8:
        return list(kernels)
    return [k for k in kernels if k in plan.DEEP_KERNEL_CHOICES]


def bench_jobs(sizes: Sequence[str], ks: Sequence[int], kernels: Sequence[str], stages: dict,
               dtype: np.dtype) -> list[BenchJob]:
    """Every configuration to run: 2D kernels on the random taps, ``separable`` on the Gaussian,
    ``auto`` on both; kernels that cannot run a stage (tensor-core above K = 9) are left out."""
    jobs = []
    for size in sizes:
        for k in ks:
            for kernel in kernels:
                for taps in ("random", "gaussian"):
                    wanted = {"random": kernel != plan.SEPARABLE,
                              "gaussian": kernel in (plan.SEPARABLE, plan.AUTO)}[taps]
                    if wanted and plan.supports(stages[k][taps], kernel, dtype):
                        jobs.append(BenchJob(size, k, taps, kernel))
    return jobs


def measure_env(device_number: int, border: str) -> BenchEnv:
    """Initialise the driver, name the device and measure its copy bandwidth and peaks."""
    with CudaBackend([], device=device_number) as probe, probe.activated():
        copy_gbps = copy_bandwidth(probe.gpu)
    device = probe.gpu.device(device_number)
    major, minor = device.compute_capability
    return BenchEnv(probe.gpu, device, f"sm_{major}{minor}", border, copy_gbps,
                    fp32_fma_peak(device), int8_tensor_peak(device))


def environment_record(env: BenchEnv, depth: int) -> dict:
    """What a result's ``environment`` says: the device, versions and rooflines."""
    major, minor = env.device.compute_capability
    version = env.gpu.driver_version()
    return {"gpu": env.device.name, "compute_capability": f"{major}.{minor}",
            "driver_cuda": f"{version // 1000}.{version % 1000 // 10}",
            "binding": f"{env.gpu.name} ({env.gpu.describe()})",
            "opencv": cv2.__version__, "numpy": np.__version__, "streamconv": __version__,
            "python": platform.python_version(), "border": env.border, "depth": depth,
            "copy_GBps": env.copy_gbps, "fp32_fma_per_s": env.fma_peak,
            "int8_tensor_mac_per_s": env.int8_peak}


def run_bench(*, sizes: Sequence[str], ks: Sequence[int], kernels: Sequence[str],
              border: str = DEFAULT_BORDER,
              device_number: int = 0, host: bool = True, progress=None, depth: int = 8) -> dict:
    """Check and time every (size, K, kernel) on RGB frames of ``depth`` bits per sample (8:
    uint8, 16: uint16); returns a JSON-ready dict (environment, rows, and ``failed`` naming any
    variant whose output differs from the CPU backend by more than 1 LSB).

    ``progress(text)`` is called before each configuration.
    """
    env = measure_env(device_number, border)
    rng = np.random.default_rng()  # the frames: fresh in every run
    dtype = np.dtype(np.uint8 if depth == 8 else np.uint16)
    taps_rng = np.random.default_rng(TAPS_SEED)
    stages = {k: {"random": random_taps(taps_rng, k), "gaussian": gaussian(k)} for k in ks}
    jobs = bench_jobs(sizes, ks, kernels_for_depth(kernels, depth), stages, dtype)
    border_code = BORDER_CODES[border]
    plan.precompile_plans((plan.plan_stage(stages[job.k][job.taps], job.kernel, dtype)
                           .kernel_plan((*SIZES[job.size], 3), border_code) for job in jobs),
                          env.arch, workers=16)
    rows: list[BenchRow] = []
    for size in sizes:
        shape = (*SIZES[size], 3)
        frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
        for k in ks:
            expected = {taps: _reference(stage, border, frame) for taps, stage in stages[k].items()}
            for job in (job for job in jobs if (job.size, job.k) == (size, k)):
                if progress:
                    progress(f"{size} K={k} {job.kernel} ({job.taps} taps)")
                row = _measure_variant(stages[k][job.taps], job.kernel, shape, frame,
                                       expected[job.taps], rng, env)
                row.size, row.taps = size, job.taps
                rows.append(row)
            if host:
                rows.extend(_host_rows(size, k, frame, stages[k]["random"], border, env.copy_gbps))
    result = {"environment": environment_record(env, depth),
              "rows": [{**asdict(r), "limiter": r.limiter} for r in rows]}
    bad = [r for r in rows if r.max_lsb is not None and r.max_lsb > 1]
    if bad:
        result["failed"] = ", ".join(f"{r.variant} {r.size} K={r.k}: {r.max_lsb} LSB" for r in bad)
    return result


def format_table(result: dict) -> str:
    """Kernel ms per variant (rows) and K (columns), one block per frame size; then the details."""
    rows = result["rows"]
    ks = sorted({r["k"] for r in rows})
    lines = []
    env = result["environment"]
    lines.append(f"{env['gpu']} (sm {env['compute_capability']}, CUDA {env['driver_cuda']}); "
                 f"copy {env['copy_GBps']:.0f} GB/s; FP32 peak {env['fp32_fma_per_s'] / 1e12:.1f} "
                 "T FMA/s; "
                 f"int8 tensor peak {env.get('int8_tensor_mac_per_s', 0) / 1e12:.0f} T MAC/s; "
                 f"border {env['border']}; binding {env.get('binding', 'pycuda')}")
    for size in dict.fromkeys(r["size"] for r in rows):
        lines.append("")
        lines.append(f"{size} RGB {env.get('depth', 8)}-bit, ms per "
                     "frame" + "".join(f"{'K=' + str(k):>10}" for k in ks))
        for name, taps in dict.fromkeys((r["variant"], r["taps"]) for r in rows
                                        if r["size"] == size):
            cells = {r["k"]: r["ms"] for r in rows
                     if (r["size"], r["variant"], r["taps"]) == (size, name, taps)}
            label = f"{name} ({taps})"
            lines.append(f"{label:<26}" + "".join(f"{cells[k]:>10.4f}" if k in cells
                                                  else f"{'-':>10}" for k in ks))
    lines.append("")
    lines.append(f"{'size':<6}{'K':>3} "
                 f"{'kernel':<18}{'taps':<9}{'ms':>9}{'2 str':>8}{'GB/s':>7}{'copy':>6}"
                 f"{'math':>6}"
                 f"  {'bound':<7}{'regs':>5}{'smem':>7}{'spill':>6}{'occ':>5} "
                 f"{'occ limit':<10}{'LSB':>4}  ran as")
    for r in rows:
        if r["max_lsb"] is None:
            continue
        lines.append(f"{r['size']:<6}{r['k']:>3} {r['variant']:<18}{r['taps']:<9}{r['ms']:>9.4f}"
                     f"{r.get('two_stream_ms', 0.0):>8.4f}{r['gbps']:>7.0f}"
                     f"{100 * r['copy_fraction']:>5.0f}%{100 * r['fma_fraction']:>5.0f}%  "
                     f"{r['limiter']:<7}"
                     f"{r['registers']:>5}{r['shared_bytes']:>7}{r['spill_bytes']:>6}"
                     f"{100 * r['occupancy']:>4.0f}% {r['occupancy_limit']:<10}{r['max_lsb']:>4}  "
                     f"{r['chosen']}")
    return "\n".join(lines)


def parse_sizes(text: str) -> list[str]:
    """``"1080p,4k"`` -> ["1080p", "4k"]; unknown names raise ValueError listing the known ones."""
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in SIZES]
    if unknown or not names:
        raise ValueError(f"unknown size {', '.join(unknown) or text!r}; known: {', '.join(SIZES)}")
    return names


def parse_ks(text: str) -> list[int]:
    """``"3,5,31"`` -> [3, 5, 31]; each an odd number 1..31."""
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"K values must be odd integers 1..31, got {text!r}") from None
    if not ks or any(k < 1 or k > 31 or k % 2 == 0 for k in ks):
        raise ValueError(f"K values must be odd integers 1..31, got {text!r}")
    return ks


def parse_kernels(text: str) -> list[str]:
    """``"all"`` or a comma list of kernel choices (``auto`` included)."""
    if text.strip() == "all":
        return list(plan.KERNEL_CHOICES)
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in plan.KERNEL_CHOICES]
    if unknown or not names:
        raise ValueError(f"unknown kernel {', '.join(unknown) or text!r}; known: all, "
                         f"{', '.join(plan.KERNEL_CHOICES)}")
    return names


def report_failures(result: dict) -> None:
    """Raise StreamError if any variant missed the CPU backend by more than 1 LSB."""
    if "failed" in result:
        raise StreamError(f"kernel output differs from the CPU backend: {result['failed']}")


def progress_printer(enabled: bool):
    """A ``progress(text)`` callback drawing one updating line on stderr, or None."""
    if not enabled:
        return None
    started = time.perf_counter()

    def show(text: str) -> None:
        elapsed = time.perf_counter() - started
        sys.stderr.write(f"\r\x1b[2K[{elapsed:6.1f} s] {text}")
        sys.stderr.flush()

    return show
