"""``streamconv bench --scale``: the scale stage on the GPU beside cv2.resize and the CPU backend.

Each case (frame sizes, kernel, depth) is first checked against the CPU backend on a fresh random
frame with the GPU's outputs poisoned (the GPU must give the same samples), then timed with CUDA
events after a warm-up, kernels only, rotating over four device frames so that 4K inputs do not
sit in L2. Beside it: the same kernel built with FUSED 1 (fmaf instead of separately rounded
products and sums: what giving up exact agreement with the CPU would gain, with its distance to
the CPU), and on the host cv2.resize with the nearest interpolation and the CPU backend itself.
GB/s counts the input read once and the output written once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import cv2
import numpy as np

from ..backends.cpu.backend import CpuBackend
from ..backends.cuda.backend import CudaBackend
from ..backends.cuda.stages import load_stage
from ..backends.plan import plan_chain, precompile_plans
from .kernels import SIZES, environment_record, measure_env
from ..chain.filters import FilterStage, parse_filter
from .timing import occupancy, poisoned_run, time_host, time_launches

ROTATE = 4  # device frames cycled through while timing (4 x 25 MB at 4K > the H100's 50 MB L2)

CASES = (("4k", "1080p", "lanczos3", 8), ("4k", "1080p", "bicubic", 8),
         ("4k", "1080p", "bilinear", 8), ("4k", "1080p", "area", 8),
         ("4k", "1080p", "lanczos3", 16), ("1080p", "4k", "lanczos3", 8),
         ("1080p", "4k", "bicubic", 8))
"""(from, to, kernel, bits per sample) timed by default; RGB frames."""

CV2_INTERPOLATION = {"lanczos3": ("INTER_LANCZOS4", cv2.INTER_LANCZOS4),
                     "bicubic": ("INTER_CUBIC", cv2.INTER_CUBIC),
                     "bilinear": ("INTER_LINEAR", cv2.INTER_LINEAR),
                     "area": ("INTER_AREA", cv2.INTER_AREA)}
"""The cv2.resize interpolation nearest each kernel (OpenCV does not widen its kernels when
shrinking but for INTER_AREA, whose result is ours within 1)."""


@dataclass
class ScaleRow:
    """One timed configuration; ms per frame, GB/s of input read plus output written."""

    case: str          # "4k -> 1080p"
    kernel: str
    bits: int
    variant: str       # "resample.cu", "resample.cu FUSED", "cv2.resize INTER_...", "cpu backend"
    ms: float
    gbps: float
    copy_fraction: float
    max_lsb: int | None = None  # largest |result - CPU backend| (None for host rows)
    registers: int = 0
    shared_bytes: int = 0
    occupancy: float = 0.0
    two_stream_ms: float = 0.0


@contextlib.contextmanager
def swapped_stage(backend: CudaBackend, stage: FilterStage, shape: tuple, dtype, defines: dict,
                  block: tuple | None = None, grid: tuple | None = None) -> Iterator[None]:
    """The backend's (one) scale stage built with ``defines`` changed (FUSED, another tile, with its
    ``block`` and ``grid``) for the block, then the stage it had again."""
    with backend.activated():
        stages = backend.stages_for(shape, dtype)
        kept = stages[0]
        launch = replace(kept.plan, defines={**kept.plan.defines, **defines},
                         block=block or kept.plan.block, grid=grid or kept.plan.grid)
        stages[0] = load_stage(backend.gpu, backend.arch, stage, launch)
    try:
        yield
    finally:
        stages[0] = kept


def _gpu_rows(stage: FilterStage, frame: np.ndarray, expected: np.ndarray, env,
              label: tuple) -> list[ScaleRow]:
    """resample.cu exact and FUSED: checked against ``expected`` (the CPU backend's), then timed."""
    moved = frame.nbytes + expected.nbytes
    with CudaBackend([stage]) as backend:
        slots = backend.allocate_slots(frame.shape, ROTATE, dtype=frame.dtype)
        rows = [_timed(backend, slots, frame, expected, env, moved, (*label, "resample.cu"))]
        with swapped_stage(backend, stage, frame.shape, frame.dtype, {"FUSED": 1}):
            fused = (*label, "resample.cu FUSED")
            rows.append(_timed(backend, slots, frame, expected, env, moved, fused))
    return rows


def _timed(backend: CudaBackend, slots, frame, expected, env, moved: int, label: tuple) -> ScaleRow:
    """One build of the stage: its distance to ``expected`` on ``frame``, then its time."""
    got = poisoned_run(backend, slots[0], frame)
    worst = int(np.abs(got.astype(np.int64) - expected.astype(np.int64)).max())
    rng = np.random.default_rng()
    with backend.activated():
        for slot in slots:
            slot.host_in[:] = rng.integers(0, np.iinfo(frame.dtype).max + 1, frame.shape,
                                           dtype=frame.dtype)
            slot.device.upload(None)  # now, synchronously
        seconds = time_launches(backend, slots)
        two_streams = time_launches(backend, slots, streams=2)
        launch, compiled = backend.compiled_stages(frame.shape, frame.dtype)[0]
        occ, _ = occupancy(env.device, compiled, launch.block[0] * launch.block[1])
        registers, shared = (compiled.attribute(name)
                             for name in ("num_regs", "shared_size_bytes"))
    gbps = moved / seconds / 1e9
    return ScaleRow(*label, ms=seconds * 1e3, gbps=gbps, copy_fraction=gbps / env.copy_gbps,
                    max_lsb=worst, registers=registers, shared_bytes=shared, occupancy=occ,
                    two_stream_ms=two_streams * 1e3)


def _host_rows(stage: FilterStage, frame: np.ndarray, out: np.ndarray, env,
               label: tuple) -> list[ScaleRow]:
    """cv2.resize with the nearest interpolation, and the CPU backend, on the same host frame."""
    name, interpolation = CV2_INTERPOLATION[stage.geometry.kernel]
    size = (out.shape[1], out.shape[0])
    rows = []
    backend = CpuBackend([stage])
    runs = ((f"cv2.resize {name}", lambda: cv2.resize(frame, size, interpolation=interpolation)),
            ("cpu backend", lambda: backend.apply_into(out, frame)))
    for variant, run in runs:
        seconds = time_host(run)
        gbps = (frame.nbytes + out.nbytes) / seconds / 1e9
        rows.append(ScaleRow(*label, variant, ms=seconds * 1e3, gbps=gbps,
                             copy_fraction=gbps / env.copy_gbps))
    return rows


def _stage(target: str, kernel: str) -> FilterStage:
    """The scale stage to a size of :data:`streamconv.bench.kernels.SIZES`."""
    height, width = SIZES[target]
    return parse_filter(f"scale:w={width},h={height},kernel={kernel}")


def _precompile(cases, arch: str) -> None:
    """Compile every case's kernel, exact and FUSED, in parallel."""
    launches = []
    for source, target, kernel, bits in cases:
        shape, dtype = (*SIZES[source], 3), np.dtype(f"uint{bits}")
        launch = plan_chain([_stage(target, kernel)]).kernel_plans(shape, 0, dtype)[0]
        launches += [launch, replace(launch, defines={**launch.defines, "FUSED": 1})]
    precompile_plans(launches, arch, workers=16)


def run_scale_bench(*, device_number: int = 0, host: bool = True, progress=None,
                    cases=CASES) -> dict:
    """Check and time every case of ``cases``; a JSON-ready dict (environment, rows, and
    ``failed`` naming any exact kernel whose output differs from the CPU backend)."""
    env = measure_env(device_number, "replicate")
    _precompile(cases, env.arch)
    rng = np.random.default_rng()
    rows: list[ScaleRow] = []
    for source, target, kernel, bits in cases:
        if progress:
            progress(f"{source} -> {target} {kernel} {bits}-bit")
        stage = _stage(target, kernel)
        dtype = np.uint8 if bits == 8 else np.uint16
        frame = rng.integers(0, np.iinfo(dtype).max + 1, (*SIZES[source], 3), dtype=dtype)
        expected = CpuBackend([stage]).apply(frame)
        label = (f"{source} -> {target}", kernel, bits)
        rows.extend(_gpu_rows(stage, frame, expected, env, label))
        if host:
            rows.extend(_host_rows(stage, frame, np.empty_like(expected), env, label))
    result = {"environment": environment_record(env, 8), "rows": [asdict(row) for row in rows]}
    bad = [r for r in rows if r.variant == "resample.cu" and r.max_lsb]
    if bad:
        result["failed"] = ", ".join(f"{r.case} {r.kernel} {r.bits}-bit: {r.max_lsb} LSB"
                                     for r in bad)
    return result


def format_scale_table(result: dict) -> str:
    """One line per row: case, kernel, variant, ms, GB/s, share of the copy bandwidth, LSB."""
    env = result["environment"]
    title = (f"{env['gpu']} (sm {env['compute_capability']}, CUDA {env['driver_cuda']}); "
             f"copy {env['copy_GBps']:.0f} GB/s")
    header = (f"{'case':<16}{'kernel':<10}{'bits':>4}  {'variant':<26}{'ms':>9}{'2 str':>8}"
              f"{'GB/s':>7}{'copy':>6}{'regs':>5}{'smem':>7}{'occ':>5}{'LSB':>5}")
    lines = [title, header]
    for r in result["rows"]:
        gpu = r["max_lsb"] is not None
        line = f"{r['case']:<16}{r['kernel']:<10}{r['bits']:>4}  {r['variant']:<26}{r['ms']:>9.4f}"
        line += f"{r['two_stream_ms']:>8.4f}" if gpu else f"{'-':>8}"
        line += f"{r['gbps']:>7.0f}{100 * r['copy_fraction']:>5.0f}%"
        if gpu:
            line += f"{r['registers']:>5}{r['shared_bytes']:>7}{100 * r['occupancy']:>4.0f}%"
            line += f"{r['max_lsb']:>5}"
        lines.append(line)
    return "\n".join(lines)
