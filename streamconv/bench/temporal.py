"""``streamconv bench --temporal``: the kernels of stages across frames at 1080p and 4K RGB.

Each case is checked first: a fresh random clip through the CUDA backend's slots (device
buffers, rings and host outputs poisoned) against the CPU backend, the largest difference kept
as ``max_lsb``. Then one temporal kernel is timed as a stream runs it: output after output
over the stage's own ring of T + 1 frames (each kernel reading the window one frame further on,
as in a run), into four output frames in turn, queued back to back behind a hold
(:func:`streamconv.bench.timing.time_launches`). ``GB/s`` counts each frame read once and the
output written once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from ..backends.plan import plan_chain, precompile_plans
from ..backends.cpu.temporal import TemporalCpuBackend
from ..backends.cuda.temporal import TemporalCudaBackend
from ..frames.borders import BORDER_CODES
from ..chain.filters import FilterStage, parse_filter
from .timing import POISON, occupancy, time_launches
from ..frames.slots import FrameMeta
from ..run.inflight import InFlight
from ..chain.temporal import validate_taps3d

SIZES = {"1080p": (1080, 1920), "4k": (2160, 3840)}
CASES = ("time T=3", "time T=5", "time T=9", "3d T=3 K=3", "3d T=5 K=5", "3d T=5 K=9", "3d T=9 K=5",
         "separable T=5 K=5")
"""What is timed: 1 x 1 taps (a mean over T frames), random T x K x K taps, and a time x space
product (tdenoise's form)."""


@dataclass
class TemporalRow:
    """One timed case; ms per output frame."""

    size: str
    case: str
    kernel: str
    ms: float
    gbps: float
    copy_fraction: float
    fma_fraction: float
    max_lsb: int
    registers: int = 0
    occupancy: float = 0.0
    math_unit: str = "FP32"  # what fma_fraction is of: the FP32 or the int8 tensor peak


def case_stage(case: str, rng: np.random.Generator) -> FilterStage:
    """The stage a case names: ``time T=n``, ``3d T=n K=k`` (random taps) or ``separable``."""
    words = dict(part.split("=") for part in case.split()[1:])
    frames, size = int(words["T"]), int(words.get("K", 1))
    if case.startswith("time"):
        return parse_filter(f"tmean:frames={frames}")
    if case.startswith("separable"):
        return parse_filter(f"tdenoise:frames={frames},sigma=1,space={(size - 1) / 6.5:.3f}")
    taps = rng.normal(0.0, 1.0, (frames, size, size)) / (frames * size)
    taps[frames // 2, size // 2, size // 2] += 1.0
    return FilterStage("conv3d", {}, (), temporal=validate_taps3d(taps))


def checked_clip(backend: TemporalCudaBackend, slots, stage: FilterStage, rng) -> int:
    """Run a random clip of T frames through ``backend``'s ``slots`` (device and host outputs
    poisoned) and through the CPU backend: the largest difference in LSB. Leaves the stage's
    ring holding that clip's frames."""
    shape = slots[0].frame_shape
    clip = rng.integers(0, 256, (stage.temporal.frames, *shape), dtype=np.uint8)
    with backend.activated():
        for slot in slots:
            backend.gpu.memset_d8(int(slot.device.buffers[1]), POISON,
                                  slot.device.pitch * slot.device.rows)
            slot.host_out.fill(POISON)
    got = _run_clip(backend, slots, clip)
    reference = TemporalCpuBackend([stage], border=backend.border)
    expected = _run_clip(reference, reference.allocate_slots(shape, 2), clip)
    return int(np.abs(got.astype(np.int64) - expected).max())


def _run_clip(engine, slots, clip: np.ndarray) -> np.ndarray:
    """Every output of ``clip`` through ``engine``'s two slots, in order."""
    in_flight, free, got = InFlight(engine), list(slots), []

    def retire() -> None:
        slot, _ = in_flight.retire()
        if slot.has_output:
            got.append(slot.host_out.copy())
        free.append(slot)

    for index, frame in enumerate(clip):
        if not free:
            retire()
        slot = free.pop()
        slot.reset()
        slot.host_in[:] = frame
        slot.meta = FrameMeta(index, index, None)
        in_flight.submit(slot)
    while in_flight.unflushed or len(in_flight):
        if free and in_flight.unflushed:
            slot = free.pop()
            slot.reset()
            in_flight.flush(slot)
        else:
            retire()
    return np.stack(got)


class WindowLaunches:
    """What time_launches takes for a backend (its ``gpu``, ``arch`` and ``launch_kernels``):
    each call queues the stage's kernel for the next output, its window one ring entry further
    on, into the next of ``targets``."""

    def __init__(self, backend: TemporalCudaBackend, shape,
                 targets: Sequence[tuple[int, int]]) -> None:
        self.backend, self.shape, self.targets = backend, tuple(shape), list(targets)
        self.gpu, self.arch = backend.gpu, backend.arch
        self.window = backend.walk.windows[0]
        self.used = backend.plan.stages(np.uint8)[0].data.used
        self.count = 0

    def launch_kernels(self, _slot: Any, stream) -> None:
        capacity = self.window.capacity
        entries = [(self.count + k) % capacity for k in self.used]
        target = self.targets[self.count % len(self.targets)]
        self.backend.launch_temporal(0, entries, target, stream, self.shape, np.uint8, self.count)
        self.count += 1


def measure_case(size: str, case: str, env, rng, stage: FilterStage | None = None, *,
                 alternate: bool = True) -> TemporalRow:
    """Check and time one case (``env``: streamconv.bench.kernels's BenchEnv; ``stage``: the case's,
    made here if not given; ``alternate``: as TemporalCudaBackend's)."""
    stage = stage or case_stage(case, rng)
    shape = (*SIZES[size], 3)
    with TemporalCudaBackend([stage], border=env.border) as backend:
        backend.alternate = alternate
        slots = backend.allocate_slots(shape, 4)  # their output buffers are written in turn
        worst = checked_clip(backend, slots, stage, rng)
        with backend.activated():
            targets = [(int(s.device.buffers[1]), s.device.pitch) for s in slots]
            launches = WindowLaunches(backend, shape, targets)
            seconds = time_launches(launches, slots)
            kernel = backend.stages_for(shape, np.uint8)[0]
            occ, _ = occupancy(env.device, kernel.function,
                               kernel.plan.block[0] * kernel.plan.block[1])
            registers = kernel.function.attribute("num_regs")
    frame_bytes = int(np.prod(shape))
    gbps = (len(launches.used) + 1) * frame_bytes / seconds / 1e9
    unit = kernel.plan.math_unit
    return TemporalRow(size, case, kernel.plan.label, seconds * 1e3, gbps, gbps / env.copy_gbps,
                       kernel.plan.products / seconds / env.peak(unit), worst, registers, occ,
                       unit)


def run_temporal_bench(env, sizes: Sequence[str], cases: Sequence[str] = CASES,
                       progress=None) -> list[dict]:
    """Every case at every size: JSON-ready rows."""
    rng = np.random.default_rng()
    stages = {case: case_stage(case, rng) for case in cases}
    plans = [plan_chain([stage]).kernel_plans((*SIZES[size], 3), BORDER_CODES[env.border])[0]
             for size in sizes for stage in stages.values()]
    precompile_plans(plans, env.arch, workers=16)  # in parallel, before any timing
    rows = []
    for size in sizes:
        for case in cases:
            if progress:
                progress(f"{size} {case}")
            rows.append(asdict(measure_case(size, case, env, rng, stages[case])))
    return rows


def format_temporal(rows: Sequence[dict]) -> str:
    """One line per case: ms per output frame, GB/s, rooflines (``math``: of the FP32 peak, or
    with ``t`` of the int8 tensor peak), registers, LSB, the kernel."""
    lines = [f"{'size':<6} {'case':<18}{'ms':>9}{'GB/s':>7}{'copy':>6}{'math':>7}{'regs':>5}"
             f"{'occ':>5}{'LSB':>4}  kernel"]
    for r in rows:
        unit = "t" if r.get("math_unit") == "tensor" else " "
        lines.append(f"{r['size']:<6} {r['case']:<18}{r['ms']:>9.4f}{r['gbps']:>7.0f}"
                     f"{100 * r['copy_fraction']:>5.0f}%{100 * r['fma_fraction']:>5.0f}%{unit}"
                     f"{r['registers']:>5}{100 * r['occupancy']:>4.0f}%{r['max_lsb']:>4}"
                     f"  {r['kernel']}")
    return "\n".join(lines)
