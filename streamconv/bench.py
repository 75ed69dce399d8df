"""``streamconv bench``: every CUDA kernel variant x K x frame size, beside OpenCV on the host.

For each frame size and K it makes random RGB frames and two filters: random float taps
(what the 2D variants are timed on) and a Gaussian (rank 1, what ``separable`` is timed on;
``auto`` is timed on both). Each variant is first checked against the CPU backend on a
fresh random frame with its output buffers poisoned, then timed with CUDA events after a
warm-up, rotating over four device frames so 4K frames do not sit in L2. Host references
are ``cv2.filter2D`` (random taps) and ``cv2.sepFilter2D`` (the Gaussian) on the same frame.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import cv2
import numpy as np

from . import __version__
from .backends import integer_taps, separable_tc, variants
from .borders import BORDER_CODES, CV_BORDERS, DEFAULT_BORDER
from .errors import StreamError
from .filters import FilterStage, gaussian_taps_1d, validate_taps

SIZES = {"1080p": (1080, 1920), "4k": (2160, 3840)}
DEFAULT_KS = (3, 5, 7, 9, 15, 31)
ROTATE = 4  # device frames cycled through while timing (4 x 25 MB at 4K > the H100's 50 MB L2)
TIME_BUDGET_S = 0.25  # GPU time spent timing one configuration (slow textbook kernels: fewer runs)
POISON = 0xA5

# FP32 lanes per SM by compute capability major version (8.0 has 64; 8.6 and later 128).
_FP32_LANES = {7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


@dataclass
class BenchRow:
    """One timed configuration; times in ms, bandwidth in GB/s (bytes read + written)."""

    size: str
    k: int
    variant: str      # a variant name, "auto", or a host reference "cv2.filter2D" / "cv2.sepFilter2D"
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
    chosen: str = ""      # the variant it ran as; "+offset" where bytes were widened to 2^15 + byte,
                          # "+tensor" for separable taps run on the tensor cores (sepconv_tc.cu)
    math_unit: str = "FP32"  # the roofline fma_fraction is of: "FP32" or "tensor" (int8)

    @property
    def limiter(self) -> str:
        """The nearer roofline: ``memory``, ``FP32`` or ``tensor``."""
        return "memory" if self.copy_fraction >= self.fma_fraction else self.math_unit


def random_taps(rng: np.random.Generator, size: int) -> FilterStage:
    """A K x K stage of random float taps around an identity (full rank)."""
    taps = rng.normal(0, 1, (size, size)) / size
    taps[size // 2, size // 2] += 1
    return FilterStage("custom", {}, (validate_taps(taps),))


def gaussian(size: int) -> FilterStage:
    """A K x K Gaussian with sigma = K / 6 (rank 1)."""
    weights = gaussian_taps_1d(size / 6.0, size)
    return FilterStage("gaussian", {"size": size}, (validate_taps(np.outer(weights, weights)),))


def copy_bandwidth(driver) -> float:
    """Device-to-device copy GB/s, counting bytes read and written (median of 20); the context
    must be current."""
    nbytes = 512 * 2**20
    src, dst = driver.mem_alloc(nbytes), driver.mem_alloc(nbytes)
    try:
        driver.memset_d8(src, 7, nbytes)
        start, end = driver.Event(), driver.Event()
        times = []
        for _ in range(25):
            start.record()
            driver.memcpy_dtod(dst, src, nbytes)
            end.record()
            end.synchronize()
            times.append(end.time_since(start) / 1e3)
    finally:
        src.free()
        dst.free()
    return 2 * nbytes / statistics.median(times[5:]) / 1e9


HOLD_SOURCE = "hold"
"""cuda/hold.cu: what time_launches queues ahead of each batch."""
_MAX_HOLD_NS = 10**9  # beyond this a batch is timed as queued (a host stalled for a second)


def time_launches(backend, slots, driver, *, budget_s: float = TIME_BUDGET_S, max_runs: int = 30) -> float:
    """Median seconds per launch of the backend's chain, rotating over ``slots``' device buffers.

    Kernels only (``launch_kernels``), on one stream, after a warm-up; each sample is a batch
    of launches timed with CUDA events. Each batch is queued behind a kernel that holds the
    stream until the whole batch is queued, so that the launches run back to back: the host's
    cost per launch (about 10 us from Python) would otherwise be timed wherever a kernel takes
    less. A batch queued after its hold ended is queued again behind a hold twice as long (up
    to a second). The context must be current.
    """
    from .backends import kernels

    hold = kernels.load_module(HOLD_SOURCE, {}, backend.arch).get_function("hold_stream")
    hold.prepare("Q")
    stream = driver.Stream()
    start, end = driver.Event(), driver.Event()
    start.record(stream)
    queued_from = time.perf_counter()
    for slot in slots:  # warm-up, and a first estimate of the time per launch
        backend.launch_kernels(slot, stream)
    queue_s = (time.perf_counter() - queued_from) / len(slots)
    end.record(stream)
    end.synchronize()
    first = end.time_since(start) / 1e3 / len(slots)
    per_batch = max(1, min(5, int(budget_s / 4 / max(first, 1e-7) / len(slots))))
    runs = max(3, min(max_runs, int(budget_s / max(first * per_batch * len(slots), 1e-7))))
    launches = per_batch * len(slots)
    hold_ns = int(2 * queue_s * launches * 1e9) + 100_000
    samples = []
    while len(samples) < runs:
        hold.prepared_async_call((1, 1, 1), (1, 1, 1), stream, hold_ns)
        start.record(stream)
        for slot in slots * per_batch:
            backend.launch_kernels(slot, stream)
        end.record(stream)
        held_throughout = not start.query()
        end.synchronize()
        if held_throughout or hold_ns > _MAX_HOLD_NS:
            samples.append(end.time_since(start) / 1e3 / launches)
        else:
            hold_ns *= 2
    return statistics.median(samples)


def time_host(function, repeats: int = 3) -> float:
    """Median wall seconds of ``function()`` over ``repeats`` calls, after one warm-up call."""
    function()
    samples = []
    for _ in range(repeats):
        begin = time.perf_counter()
        function()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def _sm_cycles_per_second(device, driver) -> float:
    """SMs x boost clock (Hz): what a per-SM, per-clock rate is multiplied by for a peak."""
    attribute = driver.device_attribute
    return device.get_attribute(attribute.MULTIPROCESSOR_COUNT) * device.get_attribute(attribute.CLOCK_RATE) * 1e3


def fp32_fma_peak(device, driver) -> float:
    """FP32 fused multiply-adds per second at the boost clock: SMs x lanes x clock."""
    major, minor = device.compute_capability()
    lanes = 64 if (major, minor) == (8, 0) else _FP32_LANES.get(major, 128)
    return lanes * _sm_cycles_per_second(device, driver)


# Dense int8 tensor-core multiply-adds per SM per clock (A100 and H100 data sheets; 1024 for the
# consumer parts of sm_86/sm_89).
_INT8_TENSOR_MACS = {(8, 0): 2048, (9, 0): 4096}


def int8_tensor_peak(device, driver) -> float:
    """Dense int8 tensor-core multiply-adds per second at the boost clock."""
    return _INT8_TENSOR_MACS.get(device.compute_capability(), 1024) * _sm_cycles_per_second(device, driver)


def occupancy(device, driver, function, threads: int) -> tuple[float, str]:
    """Resident warps per SM over the maximum, and what limits it (warps, registers, shared)."""
    attribute = driver.device_attribute
    max_threads = device.get_attribute(attribute.MAX_THREADS_PER_MULTIPROCESSOR)
    warps = -(-threads // 32)
    limits = {"blocks": device.get_attribute(attribute.MAX_BLOCKS_PER_MULTIPROCESSOR),
              "warps": max_threads // 32 // warps}
    registers = function.num_regs
    if registers:
        per_warp = -(-registers * 32 // 256) * 256  # registers are allocated per warp in 256s
        limits["registers"] = device.get_attribute(attribute.MAX_REGISTERS_PER_MULTIPROCESSOR) // (per_warp * warps)
    shared = function.shared_size_bytes
    if shared:
        per_block = shared + 1024  # the driver reserves 1 KB per block
        limits["shared"] = device.get_attribute(attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) // per_block
    limit = min(limits, key=limits.get)
    return limits[limit] * warps * 32 / max_threads, limit


def poisoned_run(backend, slot, frame: np.ndarray) -> np.ndarray:
    """The backend's output for ``frame`` through ``slot``, with its output buffers poisoned first.

    ``frame`` is what the slot's ``host_in`` holds: (H, W, C) uint8 or uint16, or flat 4:2:0
    planes, of the slot's dtype.
    """
    import pycuda.driver as driver

    if frame.dtype != slot.host_in.dtype:
        raise ValueError(f"frame dtype {frame.dtype} != slot dtype {slot.host_in.dtype}")

    height = slot.frame_shape[0]
    with backend.activated():
        for buffer in slot.device.buffers[1:]:
            driver.memset_d8(buffer, POISON, slot.device.pitch * height)
        for buffer in slot.device.planes[1:]:
            driver.memset_d8(buffer, POISON, slot.planes.nbytes)
    slot.host_out.fill(POISON ^ 0xFF)
    np.copyto(slot.host_in, frame)
    slot.reset()
    backend.submit(slot)
    backend.wait(slot)
    return slot.host_out.copy()


def _measure_variant(stage: FilterStage, kernel: str, shape, frame, expected, rng, env) -> BenchRow:
    from .backends.cuda import CudaBackend

    driver = env["driver"]
    with CudaBackend([stage], border=env["border"], kernel=kernel) as backend:
        slots = backend.allocate_slots(shape, ROTATE, dtype=frame.dtype)
        got = poisoned_run(backend, slots[0], frame)
        worst = int(np.abs(got.astype(np.int64) - expected.astype(np.int64)).max())
        with backend.activated():
            for slot in slots:
                slot.host_in[:] = rng.integers(0, np.iinfo(frame.dtype).max + 1, shape, dtype=frame.dtype)
                slot.device.upload(False)
            seconds = time_launches(backend, slots, driver)
            plan, function = backend.compiled_stages(shape, frame.dtype)[0]
            threads = plan.block[0] * plan.block[1] * plan.block[2]
            occ, limit = occupancy(env["device"], driver, function, threads)
            registers, shared, spill = function.num_regs, function.shared_size_bytes, function.local_size_bytes
    frame_bytes = frame.nbytes
    fmas = frame.size * (2 * stage.size if plan.variant == variants.SEPARABLE else stage.size**2) * len(stage.taps)
    math_unit, peak = "FP32", env["fma_peak"]
    if plan.variant == variants.TENSOR_CORE:  # the products it issues, padding included
        if plan.source == "conv3_tc":
            fmas = integer_taps.band3_products_per_frame(*shape, plan.defines["DIGITS"])
        else:
            layout = integer_taps.kernel_layout(stage.radius, shape[2], len(stage.taps))
            fmas = integer_taps.products_per_frame(layout, *shape, plan.defines["DIGITS"], len(stage.taps))
        math_unit, peak = "tensor", env["int8_peak"]
    if plan.source == "sepconv_tc":  # the separable passes on the tensor cores
        fmas = separable_tc.products_per_frame(*shape, stage.radius)
        math_unit, peak = "tensor", env["int8_peak"]
    gbps = 2 * frame_bytes / seconds / 1e9
    return BenchRow(size="", k=stage.size, variant=kernel, taps="", ms=seconds * 1e3, gbps=gbps,
                    copy_fraction=gbps / env["copy_gbps"], fma_fraction=fmas / seconds / peak, math_unit=math_unit,
                    max_lsb=worst, registers=registers, shared_bytes=shared, spill_bytes=spill,
                    occupancy=occ, occupancy_limit=limit,
                    chosen=plan.variant + ("+offset" if plan.defines.get("OFFSET_CVT") else "")
                    + ("+tensor" if plan.source == "sepconv_tc" else ""))


def _host_row(size: str, k: int, name: str, taps: str, seconds: float, frame_bytes: int, copy_gbps: float) -> BenchRow:
    gbps = 2 * frame_bytes / seconds / 1e9
    return BenchRow(size=size, k=k, variant=name, taps=taps, ms=seconds * 1e3, gbps=gbps,
                    copy_fraction=gbps / copy_gbps, fma_fraction=0.0, max_lsb=None)


def kernels_for_depth(kernels: Sequence[str], depth: int) -> list[str]:
    """The kernel choices among ``kernels`` that run frames of ``depth`` bits (16: those of
    ``variants.DEEP_KERNEL_CHOICES``)."""
    if depth == 8:
        return list(kernels)
    return [k for k in kernels if k in variants.DEEP_KERNEL_CHOICES]


def run_bench(*, sizes: Sequence[str], ks: Sequence[int], kernels: Sequence[str], border: str = DEFAULT_BORDER,
              device_number: int = 0, host: bool = True, progress=None, depth: int = 8) -> dict:
    """Check and time every (size, K, kernel) on RGB frames of ``depth`` bits per sample (8:
    uint8, 16: uint16); returns a JSON-ready dict (environment, rows).

    ``progress(text)`` is called before each configuration. Raises StreamError when a
    variant's output differs from the CPU backend by more than 1 LSB (after timing the rest).
    """
    import pycuda.driver as driver

    from .backends.cpu import CpuBackend
    from .backends.cuda import CudaBackend

    driver.init()
    device = driver.Device(device_number)
    major, minor = device.compute_capability()
    arch = f"sm_{major}{minor}"
    rng = np.random.default_rng()
    dtype = np.dtype(np.uint8 if depth == 8 else np.uint16)
    kernels = kernels_for_depth(kernels, depth)
    border_code = BORDER_CODES[border]
    stages = {k: {"random": random_taps(rng, k), "gaussian": gaussian(k)} for k in ks}
    jobs = []  # (size, k, taps name, kernel)
    for size in sizes:
        for k in ks:
            for kernel in kernels:
                for taps in ("random", "gaussian"):
                    if kernel == variants.SEPARABLE and taps == "random":
                        continue
                    if kernel not in (variants.SEPARABLE, variants.AUTO) and taps == "gaussian":
                        continue
                    if not variants.supports(stages[k][taps], kernel, dtype):
                        continue  # tensor-core above K = 9
                    jobs.append((size, k, taps, kernel))
    variants.precompile_plans((variants.plan_stage(stages[k][taps], (*SIZES[size], 3), border_code, kernel, dtype)
                               for size, k, taps, kernel in jobs), arch, workers=16)

    with CudaBackend([], device=device_number) as probe, probe.activated():
        copy_gbps = copy_bandwidth(driver)
    env = {"driver": driver, "device": device, "border": border, "copy_gbps": copy_gbps,
           "fma_peak": fp32_fma_peak(device, driver), "int8_peak": int8_tensor_peak(device, driver)}
    rows: list[BenchRow] = []
    for size in sizes:
        shape = (*SIZES[size], 3)
        frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
        for k in ks:
            expected = {}
            for taps in ("random", "gaussian"):
                with CpuBackend([stages[k][taps]], border=border) as reference:
                    expected[taps] = reference.apply(frame)
            for job_size, job_k, taps, kernel in jobs:
                if (job_size, job_k) != (size, k):
                    continue
                if progress:
                    progress(f"{size} K={k} {kernel} ({taps} taps)")
                row = _measure_variant(stages[k][taps], kernel, shape, frame, expected[taps], rng, env)
                row.size, row.taps = size, taps
                rows.append(row)
            if host:
                cv_border = CV_BORDERS[border]
                random32 = stages[k]["random"].taps[0]
                weights = gaussian_taps_1d(k / 6.0, k).astype(np.float32)
                seconds = time_host(lambda: cv2.filter2D(frame, -1, random32, borderType=cv_border))
                rows.append(_host_row(size, k, "cv2.filter2D", "random", seconds, frame.nbytes, copy_gbps))
                seconds = time_host(lambda: cv2.sepFilter2D(frame, -1, weights, weights, borderType=cv_border))
                rows.append(_host_row(size, k, "cv2.sepFilter2D", "gaussian", seconds, frame.nbytes, copy_gbps))
    version = driver.get_driver_version()
    import pycuda

    environment = {"gpu": device.name(), "compute_capability": f"{major}.{minor}",
                   "driver_cuda": f"{version // 1000}.{version % 1000 // 10}", "pycuda": pycuda.VERSION_TEXT,
                   "opencv": cv2.__version__, "numpy": np.__version__, "streamconv": __version__,
                   "python": platform.python_version(), "border": border, "depth": depth,
                   "copy_GBps": copy_gbps, "fp32_fma_per_s": env["fma_peak"],
                   "int8_tensor_mac_per_s": env["int8_peak"]}
    result = {"environment": environment, "rows": [{**asdict(r), "limiter": r.limiter} for r in rows]}
    bad = [r for r in rows if r.max_lsb is not None and r.max_lsb > 1]
    if bad:
        worst = ", ".join(f"{r.variant} {r.size} K={r.k}: {r.max_lsb} LSB" for r in bad)
        result["failed"] = worst
    return result


def format_table(result: dict) -> str:
    """Kernel ms per variant (rows) and K (columns), one block per frame size; then the details."""
    rows = result["rows"]
    ks = sorted({r["k"] for r in rows})
    lines = []
    env = result["environment"]
    lines.append(f"{env['gpu']} (sm {env['compute_capability']}, CUDA {env['driver_cuda']}); "
                 f"copy {env['copy_GBps']:.0f} GB/s; FP32 peak {env['fp32_fma_per_s'] / 1e12:.1f} T FMA/s; "
                 f"int8 tensor peak {env.get('int8_tensor_mac_per_s', 0) / 1e12:.0f} T MAC/s; "
                 f"border {env['border']}")
    for size in dict.fromkeys(r["size"] for r in rows):
        lines.append("")
        lines.append(f"{size} RGB {env.get('depth', 8)}-bit, ms per frame" + "".join(f"{'K=' + str(k):>10}" for k in ks))
        for name, taps in dict.fromkeys((r["variant"], r["taps"]) for r in rows if r["size"] == size):
            cells = {r["k"]: r["ms"] for r in rows if (r["size"], r["variant"], r["taps"]) == (size, name, taps)}
            label = f"{name} ({taps})"
            lines.append(f"{label:<26}" + "".join(f"{cells[k]:>10.4f}" if k in cells else f"{'-':>10}" for k in ks))
    lines.append("")
    lines.append(f"{'size':<6}{'K':>3} {'kernel':<18}{'taps':<9}{'ms':>9}{'GB/s':>7}{'copy':>6}{'math':>6}"
                 f"  {'bound':<7}{'regs':>5}{'smem':>7}{'spill':>6}{'occ':>5} {'occ limit':<10}{'LSB':>4}  ran as")
    for r in rows:
        if r["max_lsb"] is None:
            continue
        lines.append(f"{r['size']:<6}{r['k']:>3} {r['variant']:<18}{r['taps']:<9}{r['ms']:>9.4f}{r['gbps']:>7.0f}"
                     f"{100 * r['copy_fraction']:>5.0f}%{100 * r['fma_fraction']:>5.0f}%  {r['limiter']:<7}"
                     f"{r['registers']:>5}{r['shared_bytes']:>7}{r['spill_bytes']:>6}"
                     f"{100 * r['occupancy']:>4.0f}% {r['occupancy_limit']:<10}{r['max_lsb']:>4}  {r['chosen']}")
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
        return list(variants.KERNEL_CHOICES)
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in variants.KERNEL_CHOICES]
    if unknown or not names:
        raise ValueError(f"unknown kernel {', '.join(unknown) or text!r}; known: all, "
                         f"{', '.join(variants.KERNEL_CHOICES)}")
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
