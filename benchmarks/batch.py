"""A batch of many clips on one GPU host against the host's own encoding ceiling.

    python benchmarks/batch.py [--clips 16] [--frames 300] [--size 1080p] [--jobs 8] [--json PATH]

One generated H.264 clip (as benchmarks/pipeline.py makes them) copied ``--clips`` times, then
aggregate frames per second of:
  ceiling      ``--jobs`` processes encoding the clip's frames (already decoded, in memory)
               with libx264 ultrafast at once: what the host's cores allow a transcode
  batch nvdec  ``streamconv batch`` of the clips, 5x5 box, ``--jobs`` at once, NVDEC decoding
  batch cpu    the same with libavcodec decoding
Target (H100 host, 16 1080p clips): batch >= 0.9 x ceiling.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pipeline as transcode  # noqa: E402  (benchmarks/pipeline.py: the clip and the encoder)

import streamconv  # noqa: E402


def encode_job(args) -> int:
    clip, frames, out, width, height = args
    return transcode.encode_only(transcode.yuv_frames(Path(clip), 30), frames, Path(out), width, height)


def ceiling(clip: Path, frames: int, jobs: int, work: Path, width: int, height: int) -> float:
    """Aggregate fps of ``jobs`` libx264 encode-only processes at once."""
    tasks = [(str(clip), frames, str(work / f"enc{n}.mp4"), width, height) for n in range(jobs)]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        pool.map(encode_job, tasks[:1])  # warm the workers' imports
        begin = time.perf_counter()
        done = sum(pool.map(encode_job, tasks))
    return done / (time.perf_counter() - begin)


def batch_fps(clips: list[Path], out: Path, jobs: int, decoder: str) -> tuple[float, list]:
    shutil.rmtree(out, ignore_errors=True)
    begin = time.perf_counter()
    result = streamconv.run_batch([str(c) for c in clips], [transcode.SPEC], out, backend="cuda", jobs=jobs,
                                  decoder=decoder, sink_options={"preset": "ultrafast"})
    elapsed = time.perf_counter() - begin
    if result.exit_code != 0:
        raise SystemExit(f"batch failed: {[(r.input, r.error) for r in result.records if r.error]}")
    return sum(r.frames for r in result.records) / elapsed, result.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--size", default="1080p", choices=transcode.SIZES)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--json", default="batch.json")
    args = parser.parse_args()
    width, height = transcode.SIZES[args.size]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        clip = work / "clip.mp4"
        transcode.make_clip(clip, width, height, args.frames)
        clips = []
        for n in range(args.clips):
            clips.append(work / f"in{n:02d}.mp4")
            shutil.copyfile(clip, clips[-1])
        row = {"clips": args.clips, "frames": args.frames, "size": args.size, "jobs": args.jobs}
        row["ceiling"] = ceiling(clip, args.frames, args.jobs, work, width, height)
        batch_fps(clips[:2], work / "warm", 2, "auto")  # contexts, kernels, NVDEC load
        row["batch_nvdec"], records = batch_fps(clips, work / "out", args.jobs, "nvdec")
        row["decoders"] = sorted({r.decoder for r in records})
        row["batch_cpu"], _ = batch_fps(clips, work / "out", args.jobs, "cpu")
    row["nvdec_over_ceiling"] = row["batch_nvdec"] / row["ceiling"]
    row["cpu_over_ceiling"] = row["batch_cpu"] / row["ceiling"]
    Path(args.json).write_text(json.dumps(row, indent=1) + "\n")
    print(f"{args.clips} x {args.size} clips of {args.frames} frames, {args.jobs} at once, 5x5 box, libx264 ultrafast")
    print(f"{'ceiling':>10}{'batch nvdec':>14}{'batch cpu':>12}{'nvdec/ceil':>12}{'cpu/ceil':>10}   (aggregate fps)")
    print(f"{row['ceiling']:>10.1f}{row['batch_nvdec']:>14.1f}{row['batch_cpu']:>12.1f}"
          f"{row['nvdec_over_ceiling']:>12.2f}{row['cpu_over_ceiling']:>10.2f}")


if __name__ == "__main__":
    main()
