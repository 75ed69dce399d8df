"""Live latency: a synthetic camera through the pipeline, from capture to a frame ready to display.

    python benchmarks/live.py [--backend auto|cpu|cuda] [--size 1920x1080] [--fps 30]
                              [--frames 300] [--warmup 30] [--pipeline edge | --filter SPEC ...]
                              [--ring 3] [--json live.json] [--check]

A LivePattern source produces TestPattern frames in real time at FPS (1080p30 by default),
stamps each when it is due and keeps only the newest: a frame not taken before the next
one is due is dropped and counted, as a camera's would be. The frames run through the
pipeline (reader, compute and writer threads, ring of slots; on CUDA pinned buffers and a
stream per slot) into a NullSink standing in for the window. Per frame:

    read      capture stamp -> frame in the slot's host buffer (captured straight into it
              while the pipeline waits for a frame; copied when it arrived meanwhile)
    upload, kernel, download    the GPU stages (CUDA events; the CPU backend reports kernel)
    write     the sink call
    latency   capture stamp -> filtered frame in host memory, handed to the sink

Warm-up frames (kernel loading, first launches) are left out of the figures; drops are
counted over the measured frames. The filtered output is first checked against the CPU
backend. Targets on the GPU: latency p99 <= 2 ms and no drops at 30 fps.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402

import benchinfo  # noqa: E402
from streamconv.backends import create_backend, resolve_backend  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.chain.filters import parse_chain  # noqa: E402
from streamconv.io.sources.pattern import LivePattern, TestPattern  # noqa: E402
from streamconv.chain.presets import load_preset  # noqa: E402
from streamconv.io.sinks.sink import NullSink  # noqa: E402

STAGES = ("read", "upload", "kernel", "download", "write", "latency")
TARGET_P99_MS = 2.0


def check_backend(name: str, chain, shape: tuple[int, int, int]) -> int:
    """Max |backend - CPU reference| over one pattern frame; exits if above 1 LSB."""
    frame = next(iter(TestPattern(shape[1], shape[0], frames=1)))
    backend = create_backend(name, chain)
    try:
        got = backend.apply(frame)
    finally:
        backend.close()
    worst = int(np.abs(got.astype(int) - CpuBackend(chain).apply(frame).astype(int)).max())
    if worst > 1:
        raise SystemExit(f"{name} output differs from the CPU reference by {worst} LSB")
    return worst


def measure(args, chain, backend: str) -> dict:
    """Run the live pipeline; per-stage percentiles (ms) and drops over the measured frames."""
    width, height = args.size
    total = args.warmup + args.frames
    source = LivePattern(width, height, fps=args.fps, frames=None, copy_workers=args.copy_workers)
    marks: dict[str, float] = {"written": 0}

    def on_frame(_frame, _meta) -> None:
        marks["last"] = time.perf_counter()
        marks["written"] += 1
        if marks["written"] == args.warmup:
            marks["dropped"] = pipeline.dropped
            marks["start"] = marks["last"]

    pipeline = streamconv.Pipeline(source, chain, NullSink(), backend=backend, ring=args.ring,
                                   max_frames=total, on_frame=on_frame)
    stats = pipeline.run()
    # stats keeps the last stats.sample_cap frames' times: skip only the warm-up frames still among them.
    measured = {}
    for stage, values in stats.samples.items():
        skip = max(0, args.warmup - (stats.stages[stage].count - len(values)))
        if len(values) > skip:
            measured[stage] = np.asarray(values[skip:]) * 1e3
    table = {}
    for stage in STAGES:
        if stage in measured and measured[stage].size:
            ms = measured[stage]
            table[stage] = {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
                            "p99": float(np.percentile(ms, 99)), "max": float(ms.max())}
    frames = stats.frames - args.warmup
    seconds = marks["last"] - marks["start"] if "start" in marks else 0.0
    return {"backend": stats.backend, "frames": frames, "warmup": args.warmup,
            "dropped": stats.dropped - marks.get("dropped", 0), "dropped_in_warmup": marks.get("dropped", 0),
            "fps": frames / seconds if seconds > 0 else 0.0,
            "in_place": source.in_place, "delivered": source.delivered,
            "stages_ms": table, "latency_ms": measured.get("latency", np.empty(0)).tolist()}


def source_copy_workers(args) -> int:
    """How many threads the source's copy into the slot used."""
    from streamconv.frames.hostcopy import ParallelCopier

    return ParallelCopier(args.copy_workers).workers


def environment(backend: str) -> dict:
    commit = benchinfo.commit()
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "streamconv": streamconv.__version__, "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "commit": commit, "switch_interval_s": sys.getswitchinterval()}
    if backend == "cuda":
        from streamconv.gpu.binding import binding

        info["gpu"] = binding().device(0).name
        info["binding"] = f"{binding().name} ({binding().describe()})"
    return info


def parse_size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    return int(width), int(height)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--size", type=parse_size, default=(1920, 1080), metavar="WxH")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--frames", type=int, default=300, help="measured frames (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="frames left out first (default 30)")
    parser.add_argument("--pipeline", default="edge", help="preset to run (default edge)")
    parser.add_argument("--filter", dest="filters", action="append", default=[], metavar="SPEC",
                        help="filter spec instead of the preset; repeat to chain")
    parser.add_argument("--ring", type=int, default=3)
    parser.add_argument("--copy-workers", type=int, default=None, metavar="N",
                        help="threads copying each captured frame into its slot (1: plain copy; "
                             "default: streamconv's choice for this machine)")
    parser.add_argument("--json", default="live.json", help="where to write the results")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets are met")
    args = parser.parse_args()
    if args.warmup < 1 or args.frames < 1:
        parser.error("--warmup and --frames must be >= 1")

    chain = parse_chain(args.filters) if args.filters else list(load_preset(args.pipeline).filters)
    label = " + ".join(args.filters) if args.filters else args.pipeline
    backend = resolve_backend(args.backend)
    width, height = args.size
    worst = check_backend(backend, chain, (height, width, 3))
    result = measure(args, chain, backend)
    latency = result["stages_ms"]["latency"]
    passed = {"p99": latency["p99"] <= TARGET_P99_MS, "drops": result["dropped"] == 0}
    result.update({"environment": environment(backend), "size": f"{width}x{height}", "fps_target": args.fps,
                   "ring": args.ring, "copy_workers": source_copy_workers(args), "chain": label,
                   "max_lsb_vs_cpu": worst,
                   "targets": {"latency_p99_ms": TARGET_P99_MS, "dropped": 0, "passed": passed}})
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")

    print(f"\nlive {width}x{height} @ {args.fps:g} fps, {result['frames']} frames after {args.warmup} "
          f"warm-up, ring {args.ring}, chain {label}")
    print(f"{result['backend']}; max |out - CPU| {worst} LSB; results in {args.json}\n")
    header = f"{'stage':<10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    print(header + "\n" + "-" * len(header))
    for stage, row in result["stages_ms"].items():
        print(f"{stage:<10}" + "".join(f"{row[k]:>9.3f}" for k in ("p50", "p95", "p99", "max")))
    print(f"\ndelivered {result['fps']:.1f} fps, dropped {result['dropped']} "
          f"(+{result['dropped_in_warmup']} in warm-up); {result['in_place']} of {result['delivered']} "
          f"frames captured straight into a slot, the rest copied")
    print(f"target latency p99 <= {TARGET_P99_MS:g} ms: {'PASS' if passed['p99'] else 'FAIL'} "
          f"({latency['p99']:.3f} ms); no drops: {'PASS' if passed['drops'] else 'FAIL'}")
    return 0 if all(passed.values()) or not args.check else 1


if __name__ == "__main__":
    sys.exit(needs.run(main))
