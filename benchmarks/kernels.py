"""Kernel and GPU-stage benchmark of the CUDA backend: checks correctness, then times.

    python benchmarks/kernels.py [--json PATH] [--quick]

1. Device-to-device copy bandwidth (the roofline for a memory-bound filter).
2. conv2d kernel time at 1080p and 4K RGB for K = 3, 5, 9, 15, 31 (random taps), timed
   with CUDA events after a warm-up, rotating over 4 frame buffers so 4K frames do not sit
   in L2; as ms, GB/s (2 x frame bytes / time) and fraction of the copy bandwidth; beside
   cv2.filter2D on the host on the same frame.
3. GPU-stage throughput (upload + kernels + download, frames/s) with ring 1 versus ring 3,
   pinned versus pageable host buffers, and the pinned copy bandwidth each way.
Each configuration is first checked against the CPU backend on fresh random data.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402

import benchinfo  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.bench.kernels import random_taps  # noqa: E402
from streamconv.bench.timing import copy_bandwidth, time_host, time_launches  # noqa: E402
from streamconv.backends.cuda.backend import CudaBackend  # noqa: E402
from streamconv.chain.filters import FilterStage  # noqa: E402

SIZES = {"1080p": (1080, 1920), "4K": (2160, 3840)}
KS = (3, 5, 9, 15, 31)
ROTATE = 4


def check(backend: CudaBackend, stage: FilterStage, frame: np.ndarray) -> int:
    """Max |GPU - CPU| on one frame; raises if above 1 LSB."""
    got = backend.apply(frame)
    expected = CpuBackend([stage]).apply(frame)
    worst = int(np.abs(got.astype(int) - expected.astype(int)).max())
    if worst > 1:
        raise SystemExit(f"GPU result differs from the CPU oracle by {worst} LSB (K={stage.size})")
    return worst


def gpu_stage_throughput(stage: FilterStage, shape, ring: int, pinned: bool, frames: int, rng):
    """Frames/s of upload + kernel + download with ``ring`` slots in flight, and mean copy GB/s."""
    with CudaBackend([stage], pinned=pinned) as backend:
        slots = backend.allocate_slots(shape, ring)
        for slot in slots:
            slot.host_in[:] = rng.integers(0, 256, shape, dtype=np.uint8)
        busy = [False] * ring
        for index in range(ring * 2):  # warm-up
            slot = slots[index % ring]
            if busy[index % ring]:
                backend.wait(slot)
            backend.submit(slot)
            busy[index % ring] = True
        for index, slot in enumerate(slots):
            if busy[index]:
                backend.wait(slot)
                busy[index] = False
        uploads, downloads = [], []
        begin = time.perf_counter()
        for index in range(frames):
            slot = slots[index % ring]
            if busy[index % ring]:
                backend.wait(slot)
                uploads.append(slot.times["upload"])
                downloads.append(slot.times["download"])
            backend.submit(slot)
            busy[index % ring] = True
        for index, slot in enumerate(slots):
            if busy[index]:
                backend.wait(slot)
        elapsed = time.perf_counter() - begin
    nbytes = int(np.prod(shape))
    return frames / elapsed, nbytes / statistics.median(uploads) / 1e9, nbytes / statistics.median(downloads) / 1e9


def environment(gpu) -> dict:
    device = gpu.device(0)
    commit = benchinfo.commit()
    version = gpu.driver_version()
    return {"gpu": device.name, "compute_capability": "%d.%d" % device.compute_capability,
            "driver_cuda": f"{version // 1000}.{version % 1000 // 10}",
            "binding": f"{gpu.name} ({gpu.describe()})",
            "numpy": np.__version__, "opencv": cv2.__version__, "streamconv": streamconv.__version__,
            "python": platform.python_version(), "commit": commit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="kernels.json", help="where to write the results")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--stage-only", action="store_true", help="skip the kernel timings")
    parser.add_argument("--stage-repeats", type=int, default=3,
                        help="throughput runs per configuration; the median is reported (default 3)")
    args = parser.parse_args()
    needs.gpu()
    from streamconv.backends import plan as planning
    from streamconv.frames.borders import BORDER_CODES, DEFAULT_BORDER
    from streamconv.gpu.binding import binding

    gpu = binding()
    repeats = 5 if args.quick else 30
    rng = np.random.default_rng()
    result = {"environment": environment(gpu), "kernels": [], "stage": []}
    major, minor = gpu.device(0).compute_capability
    # Taps first, so that exactly the specialisations their plans name (an OFFSET_CVT one or
    # not, per taps) are compiled up front, in parallel.
    kernel_stages = {(label, k): random_taps(rng, k) for label in SIZES for k in KS}
    stage = random_taps(rng, 5)  # the GPU-stage throughput runs
    planning.precompile_plans((planning.plan_stage(each).kernel_plan((*size, 3), BORDER_CODES[DEFAULT_BORDER])
                               for each in [*kernel_stages.values(), stage] for size in SIZES.values()),
                              f"sm_{major}{minor}")

    with CudaBackend([]) as probe, probe.activated():
        copy_gbs = copy_bandwidth(gpu)
    result["copy_GBps"] = copy_gbs

    for label, (height, width) in SIZES.items() if not args.stage_only else ():
        shape = (height, width, 3)
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        frame_bytes = frame.nbytes
        for k in KS:
            kernel_stage = kernel_stages[(label, k)]
            with CudaBackend([kernel_stage]) as backend:
                worst = check(backend, kernel_stage, frame)
                slots = backend.allocate_slots(shape, ROTATE)
                with backend.activated():
                    for slot in slots:
                        slot.host_in[:] = rng.integers(0, 256, shape, dtype=np.uint8)
                        slot.device.upload(None)  # synchronous 2-D copy
                    seconds = time_launches(backend, slots, budget_s=repeats * 0.01)
            cv2_seconds = time_host(lambda: cv2.filter2D(frame, -1, kernel_stage.taps[0],
                                                         borderType=cv2.BORDER_REFLECT_101),
                                    max(3, repeats // 5))
            gbs = 2 * frame_bytes / seconds / 1e9
            result["kernels"].append({"size": label, "K": k, "ms": seconds * 1e3, "GBps": gbs,
                                      "copy_fraction": gbs / copy_gbs, "cv2_ms": cv2_seconds * 1e3,
                                      "max_lsb_vs_cpu": worst})

    for label, (height, width) in SIZES.items():
        for pinned in (True, False):
            for ring in (1, 3):
                runs = [gpu_stage_throughput(stage, (height, width, 3), ring, pinned,
                                             60 if args.quick else 300, rng)
                        for _ in range(args.stage_repeats)]
                fps, up, down = (statistics.median(values) for values in zip(*runs))
                result["stage"].append({"size": label, "ring": ring, "pinned": pinned, "fps": fps,
                                        "fps_runs": [run[0] for run in runs],
                                        "upload_GBps": up, "download_GBps": down})

    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    env = result["environment"]
    print(f"\n{env['gpu']} (sm {env['compute_capability']}, CUDA {env['driver_cuda']}), commit {env['commit']}")
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s (read + write)\n")
    if not args.stage_only:
        print_kernel_table(result)
    print(f"\n{'size':<6}{'host':<10}{'ring':>5}{'frames/s':>10}{'min..max':>14}{'H2D GB/s':>10}{'D2H GB/s':>10}")
    for row in result["stage"]:
        host = "pinned" if row["pinned"] else "pageable"
        spread = f"{min(row['fps_runs']):.0f}..{max(row['fps_runs']):.0f}"
        print(f"{row['size']:<6}{host:<10}{row['ring']:>5}{row['fps']:>10.0f}{spread:>14}"
              f"{row['upload_GBps']:>10.1f}{row['download_GBps']:>10.1f}")
    for label in SIZES:
        rows = {(r["pinned"], r["ring"]): r["fps"] for r in result["stage"] if r["size"] == label}
        print(f"{label}: ring 3 / ring 1 (pinned) = {rows[(True, 3)] / rows[(True, 1)]:.2f}x")
    print("(copy GB/s are event-timed per frame; with ring 3 they include waiting behind other frames' copies)")


def print_kernel_table(result: dict) -> None:
    print(f"{'size':<6}{'K':>4}{'kernel ms':>11}{'GB/s':>8}{'of copy':>9}{'cv2 ms':>9}{'LSB':>5}")
    for row in result["kernels"]:
        print(f"{row['size']:<6}{row['K']:>4}{row['ms']:>11.4f}{row['GBps']:>8.0f}"
              f"{100 * row['copy_fraction']:>8.0f}%{row['cv2_ms']:>9.2f}{row['max_lsb_vs_cpu']:>5}")


if __name__ == "__main__":
    sys.exit(needs.run(main))
