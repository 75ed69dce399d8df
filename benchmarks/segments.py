"""One long file in one piece against the same file in segments (``run --segments N``).

    python benchmarks/segments.py [--size 2160p] [--frames 600] [--gop 30] [--segments 1,2,4]
                                  [--backend cuda] [--devices 0,1] [--json PATH]

Makes one H.264 clip of ``--frames`` frames (a keyframe every ``--gop``), then times the
whole run (plan, segments, join) of a 5x5 box filter into libx264 ultrafast MP4, once per
``--segments`` count (1 is the one-piece Pipeline run). Every segmented output is checked
against the one-piece one (same frame count and pts, decoding without a damaged frame) before
its time is reported: a result whose output is wrong is an error, not a row.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402

SIZES = {"1080p": (1920, 1080), "2160p": (3840, 2160), "720p": (1280, 720)}
CHAIN = ["box:size=5"]
ENCODER = {"codec": "libx264", "preset": "ultrafast"}


def make_clip(path: Path, size: tuple[int, int], frames: int, gop: int) -> Path:
    """A sliding random picture, H.264 ultrafast, a keyframe every ``gop`` frames."""
    width, height = size
    base = np.random.default_rng(5).integers(0, 256, (height, width + 8 * frames, 3), np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(gop), "keyint_min": str(gop)}
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(base[:, 8 * index:8 * index + width]),
                                               format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def video_pts(path: Path) -> list[int]:
    """The pts of every decoded frame; a damaged frame is an error."""
    pts = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            if frame.is_corrupt:
                raise SystemExit(f"{path.name}: damaged frame at pts {frame.pts}")
            pts.append(frame.pts)
    return pts


def timed(clip: Path, out: Path, segments: int, args: argparse.Namespace) -> float:
    """Seconds of one run into ``out``: one piece for 1, else ``run_segments``."""
    started = time.perf_counter()
    if segments == 1:
        streamconv.Pipeline(str(clip), CHAIN, str(out), backend=args.backend, device=args.devices[0],
                            decoder="cpu", sink_options=ENCODER).run()
    else:
        streamconv.run_segments(clip, CHAIN, out, segments=segments, backend=args.backend,
                                devices=args.devices, sink_options=ENCODER)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=SIZES, default="2160p")
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--gop", type=int, default=30)
    parser.add_argument("--segments", default="1,2", help="comma list of segment counts (1: one piece)")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--devices", default="0", help="GPU numbers, comma separated")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    args.devices = [int(d) for d in args.devices.split(",")]
    counts = sorted({1, *(int(n) for n in args.segments.split(","))})
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        clip = make_clip(Path(folder) / "in.mp4", SIZES[args.size], args.frames, args.gop)
        reference = None
        for count in counts:
            out = Path(folder) / f"out{count}.mp4"
            seconds = timed(clip, out, count, args)
            pts = video_pts(out)
            if reference is None:
                reference = pts
            elif pts != reference:
                raise SystemExit(f"{count} segments: {len(pts)} frames / pts differ from the one-piece run")
            rows.append({"segments": count, "seconds": round(seconds, 3), "fps": round(len(pts) / seconds, 1),
                         "size": args.size, "frames": len(pts), "backend": args.backend, "devices": args.devices})
            print(f"{count:>3} segment(s): {seconds:7.2f} s  {len(pts) / seconds:7.1f} fps"
                  f"  x{rows[0]['seconds'] / seconds:.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(needs.run(main))
