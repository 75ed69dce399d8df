"""Frames through the public API at 4K RGB: device arrays in and out (CuPy), host frames
(``Filter()(x)``, ``StreamFilter.map``, ``apply_into`` a page-locked array), against the chain's
own kernel time and cv2.filter2D; then a 1080p pipeline that never leaves the GPU (NVDEC ->
streamconv -> a PyTorch model's input), with copy counters.

    python benchmarks/interop.py [--frames 200] [--clip PATH] [--json PATH]

Random K x K taps (K = 3, 5, 9), border reflect101. Every route's output is checked against the
CPU backend on a fresh random frame first (within 1 LSB). ms per frame are medians of 5 runs of
``--frames`` frames after a warm-up; "sync" calls return a complete result each time, "stream="
calls queue on the caller's CUDA stream and the loop waits once at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402
from streamconv.embed.filter import to_stages  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.bench.timing import time_launches  # noqa: E402

SHAPE = (2160, 3840, 3)


def per_frame_ms(run, frames: int) -> float:
    """Median ms per frame of ``run(frames)`` over 7 runs, after two warm-up runs."""
    run(max(4, frames // 10))
    run(max(4, frames // 10))
    times = []
    for _ in range(7):
        begin = time.perf_counter()
        run(frames)
        times.append((time.perf_counter() - begin) / frames * 1e3)
    return statistics.median(times)


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    worst = int(np.abs(got.astype(np.int64) - want.astype(np.int64)).max())
    if worst > 1:
        raise SystemExit(f"{name}: {worst} LSB from the CPU backend")


def routes(taps: np.ndarray, frames: int, rng) -> dict[str, float]:
    """ms per frame of every route for one set of taps."""
    import cupy

    host = rng.integers(0, 256, SHAPE, dtype=np.uint8)
    want = CpuBackend(to_stages(taps)).apply(host)
    device = cupy.asarray(host)
    out_device = cupy.full(SHAPE, 0xA5, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    row: dict[str, float] = {}
    with streamconv.Filter(taps, backend="cuda") as gpu:
        check("device", cupy.asarray(gpu(device)).get(), want)
        gpu.apply_into(out_device, device, stream=stream)
        stream.synchronize()
        check("device stream=", out_device.get(), want)
        check("host", gpu(host), want)
        engine = gpu._engine
        slots = engine.allocate_slots(SHAPE, 2)
        with engine.activated():
            row["kernel alone"] = time_launches(engine, slots) * 1e3
        engine.release_slots(slots)

        def sync_new(n):
            for _ in range(n):
                gpu(device)

        def stream_into(n):
            for _ in range(n):
                gpu.apply_into(out_device, device, stream=stream)
            stream.synchronize()

        def stream_new(n):
            for _ in range(n):
                result = gpu(device, stream=stream)
            stream.synchronize()
            del result

        row["device sync, new frame"] = per_frame_ms(sync_new, frames)
        row["device stream=, into out"] = per_frame_ms(stream_into, frames)
        row["device stream=, new frame"] = per_frame_ms(stream_new, frames)
        row["device copies"] = engine._device_frames.copies
        def host_new(n):
            for _ in range(n):
                gpu(host)  # dropped: its page-locked memory goes back to the pool

        row["Filter()(x) host"] = per_frame_ms(host_new, frames // 4)
        pinned = gpu(host)  # a leased page-locked result, reused as a caller-kept buffer
        row["apply_into page-locked out"] = per_frame_ms(
            lambda n: [gpu.apply_into(pinned, host) for _ in range(n)], frames // 4)
        row["host copies"] = engine._host_frames.host_copies
    pool = [rng.integers(0, 256, SHAPE, dtype=np.uint8) for _ in range(4)]
    with streamconv.StreamFilter(taps, backend="cuda", ring=3) as sf:
        check("map", next(iter(sf.map([host]))), want)
        row["StreamFilter.map host"] = per_frame_ms(
            lambda n: [None for _ in sf.map(pool[i % 4] for i in range(n))], frames // 4)
    kernel = taps.astype(np.float32)
    row["cv2.filter2D host"] = per_frame_ms(
        lambda n: [cv2.filter2D(host, -1, kernel, borderType=cv2.BORDER_REFLECT_101) for _ in range(n)], frames // 4)
    return row


def gpu_resident_pipeline(clip: str | None, frames: int) -> dict:
    """1080p decode on the GPU -> streamconv -> a torch model's float input, with copy counters."""
    import torch

    try:
        import PyNvVideoCodec as nvc
    except ImportError as exc:
        return {"skipped": f"PyNvVideoCodec: {exc}"}
    if clip is None:
        return {"skipped": "no --clip given"}
    decoder = nvc.SimpleDecoder(clip, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
    count = min(frames, len(decoder))
    with streamconv.Filter("gaussian:sigma=1", backend="cuda") as gpu:
        total = torch.zeros((), device="cuda")
        decoding = filtering = 0.0
        for index in range(count):
            if index == 5:  # the first frames pay PyTorch's and the decoder's one-time set-up
                decoding = filtering = 0.0
            begin = time.perf_counter()
            frame = decoder[index]
            torch.cuda.synchronize()
            middle = time.perf_counter()
            filtered = gpu(frame)  # complete on return: no stream given
            model_input = torch.from_dlpack(filtered).permute(2, 0, 1).float().div_(255)
            total += model_input.mean()
            torch.cuda.synchronize()
            decoding, filtering = decoding + middle - begin, filtering + time.perf_counter() - middle
        engine = gpu._engine
        timed = count - 5
        return {"frames": count, "shape": list(filtered.shape), "decode ms/frame": decoding / timed * 1e3,
                "filter + model input ms/frame": filtering / timed * 1e3,
                "host copies": 0 if engine._host_frames is None else engine._host_frames.host_copies,
                "host runner made": engine._host_frames is not None,
                "device copies": engine._device_frames.copies,
                "device frames allocated": engine._device_frames.pool.allocated, "mean": float(total) / count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--clip", help="a 1080p H.264 clip for the GPU-resident pipeline")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    needs.gpu()
    rng = np.random.default_rng(7)
    cv2.setNumThreads(os.cpu_count() or 1)
    print(f"threads for cv2: {cv2.getNumThreads()}; frame {SHAPE}")
    report = {}
    for k in (3, 5, 9):
        taps = rng.uniform(-1, 1, (k, k)).astype(np.float32)
        taps /= taps.sum() if abs(taps.sum()) > 0.1 else 1
        report[f"K={k}"] = row = routes(taps, args.frames, rng)
        print(f"K={k}: " + ", ".join(f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}"
                                      for name, value in row.items()))
    report["gpu-resident 1080p"] = resident = gpu_resident_pipeline(args.clip, args.frames)
    print("gpu-resident 1080p:", resident)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(needs.run(main))
