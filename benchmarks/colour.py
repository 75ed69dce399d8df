"""The two colour paths on the CPU backend: speed, and what an identity transcode changes.

    python benchmarks/colour.py [--size 1080p] [--frames 30] [--json PATH]

Speed, per frame of a generated H.264 clip (a moving pattern with noise), ms of:
  scaler to RGB, from RGB     the host path: FFmpeg's scaler in the reader, and in the writer
  planes to RGB, from RGB     the planes path: the decoded planes copied into a slot and the CPU
                              backend's YUV -> RGB; its RGB -> YUV and a frame to encode
                              (bands of rows on OpenCV's threads)
each the median over the frames after an untimed pass, with OpenCV's threads and with one
(the scaler is single-threaded either way)
then frames per second of ``streamconv run`` file -> identity, and -> 5x5 box, -> libx264
ultrafast file, with ``--colour host`` and the default.

Fidelity: an identity transcode to lossless FFV1, with ``--colour host`` and the default, of
640x360 synthetic clips (BT.709, limited and full range, 8 and 10 bits):
  pattern+noise  the test pattern's RGB converted to 4:2:0 by the backend's formulas, then
                 luma noise of +-8 code values (8 bits; scaled for 10): realistic content with
                 out-of-gamut triplets near saturated colours and colour edges
  random         every sample uniform over the code range (mostly out of gamut)
For each: the share of pixels out of gamut, of samples changed (all planes), the largest
change, and the share changed, and largest change, among samples whose pixels clip nothing (0
on the planes path).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import av  # noqa: E402  (after cv2: see streamconv.io.sinks.display.check_import_order)

import streamconv  # noqa: E402

import benchinfo  # noqa: E402
from streamconv.backends.cpu.backend import convert_colour  # noqa: E402
from streamconv.frames.colour import ColourTags, frame_to_rgb, plane_rows, rgb_to_frame  # noqa: E402
from streamconv.frames.gamut import unclipped_blocks, unclipped_pixels  # noqa: E402
from streamconv.frames.yuv import YuvLayout, frame_to_planes, planes_to_frame, rgb_to_yuv  # noqa: E402

SIZES = {"360p": (640, 360), "1080p": (1920, 1080)}


def synthetic_planes(kind: str, layout: YuvLayout, index: int) -> np.ndarray:
    """(1.5 W H,) planes of ``layout.dtype``: the pattern with luma noise, or uniform noise."""
    rng = np.random.default_rng(index)
    top = (1 << layout.bits) - 1
    if kind == "random":
        return rng.integers(0, top + 1, layout.shape, dtype=layout.dtype)
    pattern, rgb = streamconv.TestPattern(layout.width, layout.height), np.empty(layout.frame_shape, np.uint8)
    for _ in range(index + 1):
        pattern.read_into(rgb)
    rgb = rgb if layout.bits == 8 else rgb.astype(np.uint16) * 257
    planes = np.empty(layout.shape, layout.dtype)
    rgb_to_yuv(planes, rgb, layout)
    luma = layout.planes(planes)[0]
    noise = rng.integers(-8, 9, luma.shape) << (layout.bits - 8)
    luma[...] = np.clip(luma.astype(np.int64) + noise, 0, top)
    return planes


def write_clip(path: Path, layout: YuvLayout, kind: str, frames: int) -> list[np.ndarray]:
    """A lossless FFV1 clip of synthetic planes, tagged with the layout's matrix and range."""
    written = [synthetic_planes(kind, layout, index) for index in range(frames)]
    sink = streamconv.FileSink(path, width=layout.width, height=layout.height, frame_rate=Fraction(25),
                               codec="ffv1", pix_fmt=layout.pix_fmt, colour=layout.colour, overwrite=True)
    with sink:
        for index, planes in enumerate(written):
            sink.send(planes, streamconv.FrameMeta(index, index, Fraction(1, 25)))
    return written


def read_planes(path: Path, layout: YuvLayout) -> list[np.ndarray]:
    """Every frame of a clip as flat planes (the layout's format)."""
    frames = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            planes = np.empty(layout.shape, layout.dtype)
            frame_to_planes(planes, frame, layout)
            frames.append(planes)
    return frames


def fidelity(kind: str, layout: YuvLayout, colour: str, workdir: Path) -> dict:
    """Identity transcode of a 3-frame synthetic clip: what changed, against where it clips."""
    source, output = workdir / f"{kind}.mkv", workdir / f"{kind}-{colour}.mkv"
    written = write_clip(source, layout, kind, 3)
    streamconv.Pipeline(source, ["identity"], output, backend="cpu", colour=colour,
                        sink_options={"codec": "ffv1", "overwrite": True}).run()
    changed = inside_changed = inside_total = 0
    largest = largest_inside = 0
    outside = []
    for before, after in zip(written, read_planes(output, layout)):
        pixels = unclipped_pixels(before, layout)
        outside.append(1 - pixels.mean())
        for number, (old, new) in enumerate(zip(layout.planes(before), layout.planes(after))):
            moved = old != new
            inside = pixels if number == 0 else unclipped_blocks(pixels)
            changed += int(moved.sum())
            inside_changed += int(moved[inside].sum())
            inside_total += int(inside.sum())
            moved_by = np.abs(old.astype(np.int64) - new)
            largest = max(largest, int(moved_by.max()))
            largest_inside = max(largest_inside, int(moved_by[inside].max(initial=0)))
    total = len(written) * layout.size
    return {"kind": kind, "bits": layout.bits, "range": "full" if layout.full_range else "limited",
            "colour": colour, "out_of_gamut_pixels": float(np.mean(outside)), "changed": changed / total,
            "max_change": largest, "changed_in_gamut": inside_changed / max(inside_total, 1),
            "max_change_in_gamut": largest_inside}


def make_clip(path: Path, width: int, height: int, frames: int) -> None:
    """An H.264 clip of the moving test pattern with light noise."""
    noise = np.random.default_rng(1).integers(0, 24, (4, height, width, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        for index, rgb in enumerate(streamconv.TestPattern(width, height, frames=frames)):
            video = av.VideoFrame.from_ndarray(rgb + noise[index % 4], format="rgb24")
            video.pts = index
            container.mux(stream.encode(video))
        container.mux(stream.encode())


def conversion_ms(clip: Path, threads: int) -> dict[str, float]:
    """Median ms per frame of each path's conversions, each way, on the clip's decoded frames
    (after one untimed pass)."""
    with av.open(str(clip)) as container:
        frames = list(container.decode(video=0))
    first = frames[0]
    tags = ColourTags.of(first)
    layout = YuvLayout(first.width, first.height, tags, False, 8)
    planes, back = np.empty(layout.shape, np.uint8), np.empty(layout.shape, np.uint8)
    rgb = np.empty(layout.frame_shape, np.uint8)

    def scaler_in(frame):
        host = plane_rows(frame_to_rgb(frame).planes[0], np.uint8, layout.height)[:, :layout.width * 3]
        np.copyto(rgb, host.reshape(layout.frame_shape))

    def planes_in(frame):
        frame_to_planes(planes, frame, layout)
        convert_colour(rgb, planes, layout, to_rgb=True)

    def planes_out(_frame):
        convert_colour(rgb, back, layout, to_rgb=False)
        planes_to_frame(back, layout, "yuv420p", tags)

    steps = {"scaler to RGB": scaler_in, "scaler from RGB": lambda _frame: rgb_to_frame(rgb, "yuv420p", tags),
             "planes to RGB": planes_in, "planes from RGB": planes_out}
    saved = cv2.getNumThreads()
    cv2.setNumThreads(threads)
    try:
        result = {}
        for name, step in steps.items():
            times = []
            for timed in (False, True):
                for frame in frames:
                    begin = time.perf_counter()
                    step(frame)
                    if timed:
                        times.append(time.perf_counter() - begin)
            result[name] = 1e3 * statistics.median(times)
    finally:
        cv2.setNumThreads(saved)
    return result


def transcode_fps(clip: Path, spec: str, colour: str, workdir: Path) -> float:
    """Frames per second of file -> spec -> libx264 ultrafast file on the CPU backend."""
    stats = streamconv.Pipeline(clip, [spec], workdir / "out.mp4", backend="cpu", colour=colour,
                                sink_options={"preset": "ultrafast", "overwrite": True}).run()
    return stats.frames / stats.wall_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=SIZES, default="1080p")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result: dict = {"commit": benchinfo.commit(), "size": args.size, "threads": cv2.getNumThreads()}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        clip = workdir / "clip.mp4"
        make_clip(clip, *SIZES[args.size], args.frames)
        result["ms_per_frame"] = {"default threads": conversion_ms(clip, cv2.getNumThreads()),
                                  "1 thread": conversion_ms(clip, 1)}
        result["fps"] = {f"{spec} {colour}": transcode_fps(clip, spec, colour, workdir)
                         for spec in ("identity", "box:size=5") for colour in ("host", "auto")}
        result["fidelity"] = [fidelity(kind, YuvLayout(640, 360, ColourTags(1, 2 if full else 1), full, bits),
                                       colour, workdir)
                              for kind in ("pattern+noise", "random") for bits in (8, 10)
                              for full in (False, True) for colour in ("host", "auto")]
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    print(json.dumps({key: result[key] for key in ("commit", "size", "threads", "ms_per_frame", "fps")}, indent=2))
    print(f"{'clip':14} {'bits':>4} {'range':8} {'colour':6} {'out px':>7} {'changed':>8} {'max':>5} {'in-gamut changed':>17} {'max':>5}")
    for row in result["fidelity"]:
        print(f"{row['kind']:14} {row['bits']:>4} {row['range']:8} {row['colour']:6} {row['out_of_gamut_pixels']:7.1%} "
              f"{row['changed']:8.2%} {row['max_change']:5d} {row['changed_in_gamut']:17.2%} "
              f"{row['max_change_in_gamut']:5d}")


if __name__ == "__main__":
    main()
