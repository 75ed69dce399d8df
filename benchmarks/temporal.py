"""Stages across frames on the GPU, beside what people run today: checks, then times.

    python benchmarks/temporal.py [--json PATH] [--sizes 4k] [--no-sweep] [--no-peers]

1. ``streamconv bench --temporal``'s cases (time only, random T x K x K, time x space), each
   checked against the CPU backend on a fresh random clip, outputs poisoned, then timed as a
   stream runs them: each kernel one frame further on through its ring.
2. The two forms of K x K taps at 4K: conv3d_tc.cu (int8 digits on the tensor cores, what an
   8-bit stage up to K = 9 runs) against conv3d.cu (float32, what 16-bit frames, larger K and
   GPUs before sm_80 run), each checked against the CPU backend; conv3d.cu's launch geometry for
   random 5x5x5 taps (threads' rows, outputs per thread).
3. Peers: PyTorch's depthwise ``conv3d`` on the GPU (float32, the window's uint8 frames
   converted each call, rounded back to uint8), checked against streamconv's output; FFmpeg's
   ``tmix`` (the same mean of T frames) on the CPU through PyAV's filter graph.
4. A pipeline: 4K frames from a test pattern through a 5x5 box, and through a 5-frame mean
   then the box, to no output: frames per second of each (what a temporal stage costs a run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402
from streamconv.bench import kernels as bench, temporal as bench_temporal  # noqa: E402
from streamconv.backends.families import temporal as family  # noqa: E402
from streamconv.backends.plan import plan_chain, precompile_plans  # noqa: E402
from streamconv.frames.borders import BORDER_CODES  # noqa: E402

SWEEP = [(4, 4, 8), (4, 8, 4), (4, 12, 4), (4, 16, 4), (8, 4, 8)]
"""(OUT_X, OUT_Y, BLOCK_Y) tried for conv3d.cu at 4K, random 5x5x5 taps."""
TCONV_SWEEP = [(256, 1, True), (256, 1, False), (256, 2, True), (128, 1, True)]
"""(THREADS, VECS, alternate) tried for temporal.cu at 4K, a mean of 5 frames."""


def sweep(env, rng) -> list[dict]:
    """Time random 5x5x5 taps at 4K under each launch geometry of SWEEP."""
    stage = bench_temporal.case_stage("3d T=5 K=5", rng)
    default = family.conv3d_geometry
    shape = (*bench_temporal.SIZES["4k"], 3)
    rows = []
    try:
        geometries = []
        for out_x, out_y, block_y in SWEEP:
            def geometry(radius, channels, sample_bytes, separable=False, out_y=out_y, out_x=out_x,
                         block_y=block_y):
                return {"BLOCK_X": 32, "BLOCK_Y": block_y, "OUT_X": out_x, "OUT_Y": out_y,
                        "ROWS_UNROLLED": int(radius <= 3)}
            geometries.append(geometry)
        plans = []
        for geometry in geometries:
            family.conv3d_geometry = geometry
            plans.append(plan_chain([stage]).kernel_plans(shape, BORDER_CODES[env.border])[0])
        precompile_plans(plans, env.arch, workers=16)
        for (out_x, out_y, block_y), geometry in zip(SWEEP, geometries):
            family.conv3d_geometry = geometry
            row = bench_temporal.measure_case("4k", "3d T=5 K=5", env, rng, stage)
            rows.append({"out_x": out_x, "out_y": out_y, "block_y": block_y, **row.__dict__})
            print(f"sweep OUT_X={out_x} OUT_Y={out_y} BLOCK_Y={block_y}: {row.ms:.4f} ms, "
                  f"{row.registers} regs, {100 * row.occupancy:.0f}% occupancy, "
                  f"{row.max_lsb} LSB", flush=True)
    finally:
        family.conv3d_geometry = default
    return rows


FORM_CASES = ("3d T=3 K=3", "3d T=5 K=5", "3d T=5 K=9", "3d T=9 K=5", "separable T=5 K=5")
"""Cases timed on both forms."""


def forms(env, rng) -> list[dict]:
    """Each of FORM_CASES at 4K on conv3d_tc.cu and on conv3d.cu (the family's TC_RADII emptied)."""
    shape = (*bench_temporal.SIZES["4k"], 3)
    stages = {case: bench_temporal.case_stage(case, rng) for case in FORM_CASES}
    default = family.TC_RADII
    rows = []
    try:
        for radii, name in ((default, "tensor"), ((), "float32")):
            family.TC_RADII = radii
            precompile_plans([plan_chain([stage]).kernel_plans(shape, BORDER_CODES[env.border])[0]
                              for stage in stages.values()], env.arch, workers=16)
            for case, stage in stages.items():
                row = bench_temporal.measure_case("4k", case, env, rng, stage)
                rows.append({"form": name, **row.__dict__})
                print(f"form {name:<8} {case:<18} {row.ms:.4f} ms, {row.registers} regs, "
                      f"{100 * row.fma_fraction:.0f}% of the {row.math_unit} peak, "
                      f"{row.max_lsb} LSB  {row.kernel}", flush=True)
    finally:
        family.TC_RADII = default
    return rows


def tconv_sweep(env, rng) -> list[dict]:
    """Time a 5-frame mean at 4K under each (THREADS, VECS) of TCONV_SWEEP."""
    stage = bench_temporal.case_stage("time T=5", rng)
    default = family.tconv_geometry
    shape = (*bench_temporal.SIZES["4k"], 3)
    rows = []
    try:
        plans = []
        for threads, vecs, _ in TCONV_SWEEP:
            family.tconv_geometry = lambda frames, threads=threads, vecs=vecs: (threads, vecs)
            plans.append(plan_chain([stage]).kernel_plans(shape, BORDER_CODES[env.border])[0])
        precompile_plans(plans, env.arch, workers=16)
        for threads, vecs, alternate in TCONV_SWEEP:
            family.tconv_geometry = lambda frames, threads=threads, vecs=vecs: (threads, vecs)
            row = bench_temporal.measure_case("4k", "time T=5", env, rng, stage,
                                              alternate=alternate)
            rows.append({"threads": threads, "vecs": vecs, "alternate": alternate, **row.__dict__})
            print(f"sweep THREADS={threads} VECS={vecs} alternate={alternate}: {row.ms:.4f} ms, "
                  f"{row.gbps:.0f} GB/s, {row.registers} regs, {row.max_lsb} LSB", flush=True)
    finally:
        family.tconv_geometry = default
    return rows


def torch_conv3d(frames: int, size: int, height: int, width: int, rng) -> dict | None:
    """PyTorch's depthwise conv3d on a 4K RGB window of uint8 frames on the GPU, converted to
    float32 (N C T H W) each call, padded like reflect101, rounded back: ms per output frame."""
    try:
        import torch
        import torch.nn.functional as functional
    except ImportError:
        return None
    device = torch.device("cuda")
    frames_now = rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8)
    window = torch.from_numpy(frames_now).to(device)
    taps = rng.normal(0, 1, (frames, size, size)).astype(np.float32) / (frames * size)
    taps = torch.from_numpy(taps)
    weight = taps.to(device)[None, None].repeat(3, 1, 1, 1, 1)  # (C, 1, T, K, K): depthwise

    def step():
        volume = window.permute(3, 0, 1, 2)[None].float()  # (1, C, T, H, W)
        padded = functional.pad(volume, (size // 2,) * 4 + (0, 0), mode="reflect")
        out = functional.conv3d(padded, weight, groups=3)
        return out.round().clamp(0, 255).to(torch.uint8)[0, :, 0].permute(1, 2, 0).contiguous()

    for _ in range(3):
        step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(7):
        start.record()
        for _ in range(5):
            step()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 5)
    return {"peer": f"torch conv3d depthwise T={frames} K={size}", "ms": statistics.median(samples),
            "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def ffmpeg_tmix(frames: int, height: int, width: int, rng, count: int = 24) -> dict:
    """FFmpeg's tmix (equal weights: a mean of ``frames`` frames) on rgb24 frames on the CPU,
    through PyAV's filter graph: ms per output frame (the filter alone, frames made before)."""
    import av

    graph = av.filter.Graph()
    source = graph.add_buffer(width=width, height=height, format="rgb24", time_base=1 / 30)
    mix = graph.add("tmix", f"frames={frames}")
    sink = graph.add("buffersink")
    source.link_to(mix)
    mix.link_to(sink)
    graph.configure()
    pictures = [av.VideoFrame.from_ndarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8),
                                           format="rgb24") for _ in range(4)]
    begin = time.perf_counter()
    out = 0
    for index in range(count):
        picture = pictures[index % 4]
        picture.pts = index
        graph.push(picture)
        while True:
            try:
                graph.pull()
                out += 1
            except (av.BlockingIOError, av.EOFError):
                break
    seconds = time.perf_counter() - begin
    return {"peer": f"ffmpeg tmix frames={frames} (cpu, rgb24)", "ms": 1e3 * seconds / max(out, 1),
            "ffmpeg_threads": "default"}


def pipeline_fps(frames: int = 300) -> list[dict]:
    """4K test pattern -> chain -> no output on the cuda backend: frames per second."""
    rows = []
    for chain in (["box:size=5"], ["tmean:frames=5", "box:size=5"]):
        source = f"test:3840x2160,frames={frames}"
        stats = streamconv.Pipeline(source, chain, None, backend="cuda").run()
        rows.append({"chain": " -> ".join(chain), "fps": stats.fps, "frames": stats.frames,
                     "delay_frames": stats.delay_frames,
                     "kernel_ms_p50": stats.summary().get("kernel", {}).get("p50")})
        print(f"pipeline {rows[-1]['chain']}: {stats.fps:.1f} fps, kernel p50 "
              f"{rows[-1]['kernel_ms_p50']:.3f} ms", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="temporal.json", help="where to write the results")
    parser.add_argument("--sizes", default="1080p,4k", help="frame sizes of the kernel table")
    parser.add_argument("--no-table", action="store_true",
                        help="skip the kernel table (streamconv bench --temporal prints it too) "
                             "and the two forms' comparison")
    parser.add_argument("--no-sweep", action="store_true", help="skip the launch-geometry sweeps")
    parser.add_argument("--no-peers", action="store_true",
                        help="skip PyTorch, FFmpeg and the pipeline")
    args = parser.parse_args()
    needs.gpu()
    env = bench.measure_env(0, "reflect101")
    rng = np.random.default_rng()
    result = {"environment": bench.environment_record(env, 8)}
    if not args.no_table:
        result["kernels"] = bench_temporal.run_temporal_bench(env, bench.parse_sizes(args.sizes))
        print(bench_temporal.format_temporal(result["kernels"]), flush=True)
        result["forms"] = forms(env, rng)
    if not args.no_sweep:
        family.TC_RADII, default_radii = (), family.TC_RADII  # the sweep is conv3d.cu's
        try:
            result["sweep"] = sweep(env, rng)
        finally:
            family.TC_RADII = default_radii
        result["tconv_sweep"] = tconv_sweep(env, rng)
    if not args.no_peers:
        height, width = bench_temporal.SIZES["4k"]
        cases = ((3, 3), (5, 5), (5, 9), (9, 5))
        peers = [torch_conv3d(t, k, height, width, rng) for t, k in cases]
        peers += [ffmpeg_tmix(t, height, width, rng) for t in (3, 5)]
        result["peers"] = [peer for peer in peers if peer is not None]
        for peer in result["peers"]:
            print(f"{peer['peer']}: {peer['ms']:.3f} ms per frame", flush=True)
        result["pipeline"] = pipeline_fps()
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(needs.run(main))
