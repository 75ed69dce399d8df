"""StreamFilter in an application's loop: how much the ring overlaps, and what Python costs per frame.

    python benchmarks/api.py [--backend cuda] [--frames 300] [--json PATH]

1. Overlap: 300 1080p RGB frames through ``StreamFilter(..., ring=R).map(frames)`` with the
   same host work per frame (a busy wait of H ms) either after each result (display,
   encode) or while producing each frame (capture); wall time with ring 3 over ring 1.
   ``map`` fetches the next frame before it waits for the current result, so capture work
   overlaps the GPU even with ring 1; the ring pays for work done on the results.
   The loop uses ``map(frames, copy=False)``: outputs are views of the page-locked buffers.
2. Python overhead per frame: with ring 1, no host work and a 64x64 frame (so copies are
   negligible), the wall time per submit + result minus the GPU's own time for that frame
   (upload + kernels + download, CUDA events). Also, at 1080p, the per-frame breakdown of
   wall time into GPU time and the staging copy timed alone.
3. Capture from a file: a generated 1080p H.264 clip read by cv2.VideoCapture, ring 3,
   ``map(..., copy=False)``: frames read as new arrays (``map`` copies each into its slot)
   against frames read straight into ``StreamFilter.input_buffer`` (no copy), beside
   reading alone.
Outputs are checked against the CPU backend first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402
from streamconv.backends import create_backend  # noqa: E402
from streamconv.chain.filters import parse_chain  # noqa: E402
from pipeline import make_clip  # noqa: E402  (benchmarks/pipeline.py)

SHAPE = (1080, 1920, 3)
SPEC = "gaussian:sigma=1"
HOST_MS = (0.0, 0.25, 0.5, 1.0, 2.0)


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def produce(pool: list[np.ndarray], count: int, host_seconds: float):
    """Yield ``count`` frames from ``pool``, spending ``host_seconds`` of host work on each."""
    for index in range(count):
        busy_wait(host_seconds)
        yield pool[index % len(pool)]


def run_stream(backend: str, ring: int, pool, count: int, host_seconds: float, where: str) -> float:
    """Seconds to filter ``count`` frames with StreamFilter(ring) (setup and warm-up excluded).

    ``where``: "results" (host work after each result) or "capture" (while producing frames).
    """
    produce_seconds = host_seconds if where == "capture" else 0.0
    consume_seconds = host_seconds if where == "results" else 0.0
    with streamconv.StreamFilter(SPEC, ring=ring, backend=backend) as stream:
        for _ in stream.map(produce(pool, 2 * ring, 0.0)):
            pass  # warm-up: compile, allocate
        begin = time.perf_counter()
        for _ in stream.map(produce(pool, count, produce_seconds), copy=False):
            busy_wait(consume_seconds)  # the application shows or encodes the view here
        return time.perf_counter() - begin


def api_overhead_seconds(backend: str, count: int) -> tuple[float, float]:
    """(wall, GPU) seconds per frame of StreamFilter with ring 1 on 64x64 frames (medians of batches)."""
    frames = [np.random.default_rng(seed).integers(0, 256, (64, 64, 3), dtype=np.uint8) for seed in range(4)]
    walls = []
    with streamconv.StreamFilter(SPEC, ring=1, backend=backend) as stream:
        for _ in stream.map(frames * 10, copy=False):
            pass  # warm-up
        for _ in range(7):
            begin = time.perf_counter()
            for _ in stream.map(frames * (count // 4), copy=False):
                pass
            walls.append((time.perf_counter() - begin) / (4 * (count // 4)))
    return statistics.median(walls), gpu_seconds_per_frame(backend, frames, 200, shape=(64, 64, 3))


def gpu_seconds_per_frame(backend_name: str, pool, count: int, shape=SHAPE) -> float:
    """Median upload + kernels + download per frame from the backend's own timers."""
    engine = create_backend(backend_name, parse_chain([SPEC]))
    try:
        slot = engine.allocate_slots(shape, 1)[0]
        samples = []
        for index in range(count):
            np.copyto(slot.host_in, pool[index % len(pool)])
            slot.reset()
            engine.submit(slot)
            engine.wait(slot)
            samples.append(sum(slot.times.get(k, 0.0) for k in ("upload", "kernel", "download")))
        return statistics.median(samples[5:])
    finally:
        engine.close()


def copy_seconds(pool, count: int) -> float:
    """Median time of the host copy StreamFilter makes per frame (your frame into a pinned slot)."""
    from streamconv.frames.hostcopy import ParallelCopier

    copier = ParallelCopier()
    pinned = np.empty(SHAPE, np.uint8)
    try:
        from streamconv.gpu.binding import binding  # page-locked as the slots are, where it runs

        context = binding().device(0).retain_primary_context()
        context.push()
        pinned = binding().alloc_host(SHAPE, np.uint8)
    except Exception:
        context = None
    samples = []
    for index in range(count):
        begin = time.perf_counter()
        copier.copy(pinned, pool[index % len(pool)])
        samples.append(time.perf_counter() - begin)
    copier.close()
    if context is not None:
        del pinned
        context.pop()
        context.release()
    return statistics.median(samples[5:])


def capture_seconds(backend: str, clip: Path, into_buffers: bool | None) -> float:
    """Seconds per frame to read ``clip`` with cv2.VideoCapture and filter it with ring 3
    (``into_buffers``: read into input_buffer(), or as new arrays; None: read alone)."""
    import cv2

    capture = cv2.VideoCapture(str(clip))
    count = 0
    begin = time.perf_counter()
    if into_buffers is None:
        ok, frame = capture.read()
        while ok:
            count += 1
            ok, frame = capture.read(frame)
    else:
        with streamconv.StreamFilter(SPEC, ring=3, backend=backend) as stream:
            def frames():
                ok, frame = capture.read()
                while ok:
                    yield frame
                    ok, frame = capture.read(stream.input_buffer(frame.shape) if into_buffers else None)

            for _ in stream.map(frames(), copy=False):
                count += 1
    elapsed = time.perf_counter() - begin
    capture.release()
    return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--json", default="api.json")
    args = parser.parse_args()
    rng = np.random.default_rng()
    pool = [rng.integers(0, 256, SHAPE, dtype=np.uint8) for _ in range(8)]

    with streamconv.Filter(SPEC, backend=args.backend) as single:
        backend = single.backend
        worst = max(int(np.abs(single(frame).astype(int)
                               - streamconv.Filter(SPEC, backend="cpu")(frame).astype(int)).max())
                    for frame in pool[:2])
    if worst > 1:
        raise SystemExit(f"{backend} output differs from the CPU backend by {worst} LSB")

    rows = []
    for where in ("results", "capture"):
        for host_ms in HOST_MS:
            ring1 = run_stream(backend, 1, pool, args.frames, host_ms / 1e3, where)
            ring3 = run_stream(backend, 3, pool, args.frames, host_ms / 1e3, where)
            rows.append({"host_work": where, "host_ms": host_ms, "ring1_s": ring1, "ring3_s": ring3,
                         "ratio": ring3 / ring1})

    wall = rows[0]["ring1_s"] / args.frames  # ring 1, no host work
    gpu = gpu_seconds_per_frame(backend, pool, 60) if backend == "cuda" else 0.0
    copies = copy_seconds(pool, 60)
    tiny_wall, tiny_gpu = api_overhead_seconds(backend, 1000) if backend == "cuda" else (0.0, 0.0)
    overhead = {"wall_us": wall * 1e6, "gpu_us": gpu * 1e6, "host_copy_alone_us": copies * 1e6,
                "tiny_frame_wall_us": tiny_wall * 1e6, "tiny_frame_gpu_us": tiny_gpu * 1e6,
                "python_overhead_us": (tiny_wall - tiny_gpu) * 1e6}
    with tempfile.TemporaryDirectory() as scratch:
        clip = Path(scratch) / "clip.mp4"
        make_clip(clip, SHAPE[1], SHAPE[0], args.frames)
        capture_runs = {name: [capture_seconds(backend, clip, how) for _ in range(2)]
                        for name, how in (("read_alone", None), ("new_arrays", False), ("input_buffer", True))}
    capture = {name: min(runs) * 1e6 for name, runs in capture_runs.items()}
    result = {"backend": backend, "filter": SPEC, "shape": SHAPE, "frames": args.frames,
              "max_lsb_vs_cpu": worst, "overlap": rows, "per_frame_ring1": overhead,
              "capture_us_per_frame": capture}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")

    print(f"\nStreamFilter({SPEC!r}) on {backend}, {args.frames} frames of {SHAPE[1]}x{SHAPE[0]}")
    print(f"{'host work on':<14}{'ms/frame':>9}{'ring 1 s':>10}{'ring 3 s':>10}{'ring3/ring1':>13}")
    for row in rows:
        print(f"{row['host_work']:<14}{row['host_ms']:>9.2f}{row['ring1_s']:>10.3f}{row['ring3_s']:>10.3f}"
              f"{row['ratio']:>13.2f}")
    print(f"\ncv2.VideoCapture of a {SHAPE[1]}x{SHAPE[0]} H.264 clip, ring 3, us per frame (best of 2): "
          f"reading alone {capture['read_alone']:.0f}, filtering frames read as new arrays "
          f"{capture['new_arrays']:.0f}, read into input_buffer {capture['input_buffer']:.0f}")
    if backend != "cuda":
        print(f"\nring 1, no host work: {overhead['wall_us']:.0f} us per frame (the CPU backend filters "
              f"in the calling thread, so there is no overlap and no GPU time to subtract)")
        return
    print(f"\nring 1, no host work, 1080p: {overhead['wall_us']:.0f} us per frame; GPU alone "
          f"{overhead['gpu_us']:.0f} us, staging copy alone {overhead['host_copy_alone_us']:.0f} us")
    print(f"Python + driver overhead per frame (64x64, ring 1): {overhead['tiny_frame_wall_us']:.0f} us wall"
          f" - {overhead['tiny_frame_gpu_us']:.0f} us GPU = {overhead['python_overhead_us']:.0f} us")


if __name__ == "__main__":
    sys.exit(needs.run(main))
