"""A batch of many clips on one GPU host against the host's own encoding ceiling.

    python benchmarks/batch.py [--clips 16] [--frames 300] [--size 1080p] [--jobs 8] [--json PATH]

One generated H.264 clip (as benchmarks/pipeline.py makes them) copied ``--clips`` times, then
aggregate frames per second of:
  ceiling      ``--jobs`` processes encoding the clip's frames (already decoded, in memory)
               with libx264 ultrafast at once: what the host's cores allow a transcode
  batch nvdec  ``streamconv batch`` of the clips, 5x5 box, ``--jobs`` at once, NVDEC decoding
  batch cpu    the same with libavcodec decoding
  first frame  time from an input's turn to its first frame written, for inputs after the first
               (threads of this process, whose CUDA context and kernels the warm-up made):
               median and max over a batch of --jobs clips
  rounds       with ``--rounds N``, the ceiling and the NVDEC batch again, one after the other, N
               times: the host's speed drifts by a fifth between minutes, so a ratio is only
               worth its pair; the median ratio is reported. ``--other-jobs 4,8`` adds batches
               of those many inputs at once to every round, against the same ceiling
  null scaling with ``--null-scaling``, ``--jobs`` pipelines to no output (NVDEC, 5x5 box) as
               threads of one process and as processes: what the decoding side alone can feed
With ``--devices 0,1`` (or ``all``) the batches spread over those GPUs, ``--jobs`` at once on each,
and ``--per-device`` also times the same batch on the first GPU alone for the ratio.
Targets (H100 host, 16 1080p clips): batch >= 0.9 x ceiling; first frame <= 50 ms; two GPUs
>= 1.8 x one when the CPU is not the limit.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)
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


def pipeline_to_null(clip: str) -> int:
    """Frames of one NVDEC pipeline of ``clip`` through the 5x5 box into no output."""
    return streamconv.Pipeline(clip, [transcode.SPEC], None, backend="cuda", decoder="nvdec").run().frames


def _fps_of(pool, clip: Path, count: int) -> float:
    """Aggregate fps of ``count`` pipelines to no output on ``pool`` (an executor)."""
    begin = time.perf_counter()
    return sum(pool.map(pipeline_to_null, [str(clip)] * count)) / (time.perf_counter() - begin)


def null_scaling(clip: Path, count: int) -> dict:
    """Aggregate fps of ``count`` pipelines to no output, as threads of this process and as
    processes (each warmed by one untimed run): the decoding side's own limit."""
    pipeline_to_null(str(clip))  # this process's context and kernels
    with ThreadPoolExecutor(count) as pool:
        threads = _fps_of(pool, clip, count)
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(pipeline_to_null, [str(clip)] * count))  # the workers' contexts and kernels
        processes = _fps_of(pool, clip, count)
    return {"threads": threads, "processes": processes}


def rounds(clip: Path, clips: list[Path], work: Path, args, devices, width: int, height: int) -> dict:
    """The ceiling and the NVDEC batch (the default processes, then each of ``--processes``, then
    each of ``--other-jobs`` with its default processes), one after the other, ``args.rounds`` times."""
    pairs = []
    for _ in range(args.rounds):
        pair = {"ceiling": ceiling(clip, args.frames, args.jobs * len(devices or [0]), work, width, height)}
        settings = [(args.jobs, None, "")] + [(args.jobs, count, f"_{count}_processes") for count in args.processes] \
            + [(jobs, None, f"_{jobs}_jobs") for jobs in args.other_jobs]
        for jobs, count, suffix in settings:
            pair[f"batch_nvdec{suffix}"], _ = batch_fps(clips, work / "out", jobs, "nvdec", devices=devices,
                                                        processes=count)
            pair[f"ratio{suffix}"] = pair[f"batch_nvdec{suffix}"] / pair["ceiling"]
        pairs.append(pair)
    medians = {f"median_{key}": statistics.median_high(pair[key] for pair in pairs)
               for key in pairs[0] if key.startswith("ratio")}
    return {"rounds": pairs, **medians}


def batch_fps(clips: list[Path], out: Path, jobs: int, decoder: str, **options) -> tuple[float, list]:
    shutil.rmtree(out, ignore_errors=True)
    begin = time.perf_counter()
    result = streamconv.run_batch([str(c) for c in clips], [transcode.SPEC], out, backend="cuda", jobs=jobs,
                                  decoder=decoder, sink_options={"preset": "ultrafast"}, **options)
    elapsed = time.perf_counter() - begin
    if result.exit_code != 0:
        raise SystemExit(f"batch failed: {[(r.input, r.error) for r in result.records if r.error]}")
    return sum(r.frames for r in result.records) / elapsed, result.records


def counts(text: str) -> list[int]:
    """A comma-separated list of counts (``4,8``) as integers."""
    return [int(part) for part in text.split(",") if part]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--size", default="1080p", choices=transcode.SIZES)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--json", default="batch.json")
    parser.add_argument("--devices", default=None, help="GPUs to spread over (e.g. 0,1 or all; default 0)")
    parser.add_argument("--per-device", action="store_true", help="also time the batch on the first GPU alone")
    parser.add_argument("--skip-cpu", action="store_true", help="leave out the libavcodec batch")
    parser.add_argument("--rounds", type=int, default=0, help="also time the ceiling and the NVDEC batch "
                                                              "in turn this many times (median ratio)")
    parser.add_argument("--null-scaling", action="store_true", help="also time --jobs pipelines to no output "
                                                                     "as threads and as processes")
    parser.add_argument("--processes", default=[], type=counts,
                        help="also time the NVDEC batch with these worker process counts, e.g. 1,4,8 "
                             "(the default count is always timed; with --rounds, in every round)")
    parser.add_argument("--other-jobs", default=[], type=counts,
                        help="with --rounds, also time the NVDEC batch at these --jobs counts in every round, "
                             "each against that round's ceiling of --jobs encoders (e.g. --jobs 16 "
                             "--other-jobs 4,8: which count comes nearest the host's ceiling)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    needs.gpu()
    devices = None
    if args.devices is not None:
        from streamconv.gpu.device import cuda_device_count

        devices = (list(range(cuda_device_count())) if args.devices == "all"
                   else [int(part) for part in args.devices.split(",")])
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
        # As many encoders at once as the batch runs: --jobs on each GPU.
        row["ceiling"] = ceiling(clip, args.frames, args.jobs * len(devices or [0]), work, width, height)
        batch_fps(clips[:2], work / "warm", 2, "auto", processes=1, devices=devices)  # contexts, kernels, NVDEC
        _, records = batch_fps(clips, work / "first", args.jobs, "nvdec", processes=1, devices=devices)
        for ahead in (False, True):  # inputs opened while the worker's previous one ran, and the others
            firsts = sorted(r.first_frame_ms for r in records if r.opened_ahead == ahead)
            if firsts:
                name = "opened_ahead" if ahead else "first_wave"
                row[f"first_frame_ms_{name}"] = {"median": firsts[len(firsts) // 2], "max": firsts[-1]}
        row["batch_nvdec"], records = batch_fps(clips, work / "out", args.jobs, "nvdec", devices=devices)
        row["batch_nvdec_one_at_a_time"], _ = batch_fps(clips, work / "out", args.jobs, "nvdec", devices=devices,
                                                        open_ahead=False)
        row["decoders"] = sorted({r.decoder for r in records})
        row["devices_used"] = sorted({r.device for r in records})
        for count in [] if args.rounds else args.processes:  # with --rounds, timed in every round instead
            row[f"batch_nvdec_{count}_processes"], _ = batch_fps(clips, work / "out", args.jobs, "nvdec",
                                                                  devices=devices, processes=count)
        if args.per_device and devices and len(devices) > 1:
            row["batch_nvdec_one_gpu"], _ = batch_fps(clips, work / "out", args.jobs, "nvdec", devices=devices[:1])
            row["gpus_over_one"] = row["batch_nvdec"] / row["batch_nvdec_one_gpu"]
        if args.rounds:
            row.update(rounds(clip, clips, work, args, devices, width, height))
        if args.null_scaling:
            row["null_scaling"] = null_scaling(clip, args.jobs)
        if not args.skip_cpu:
            row["batch_cpu"], _ = batch_fps(clips, work / "out", args.jobs, "cpu", devices=devices)
            row["cpu_over_ceiling"] = row["batch_cpu"] / row["ceiling"]
    row["nvdec_over_ceiling"] = row["batch_nvdec"] / row["ceiling"]
    Path(args.json).write_text(json.dumps(row, indent=1) + "\n")
    print(f"{args.clips} x {args.size} clips of {args.frames} frames, {args.jobs} at once, 5x5 box, libx264 ultrafast")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    sys.exit(needs.run(main))
