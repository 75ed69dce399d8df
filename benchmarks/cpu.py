"""CPU backend: per-filter times, the library against cv2.filter2D, and whole transcodes.

    python benchmarks/cpu.py [--parts filters,check,api,transcode] [--baseline ROOT]
                             [--repeat 7] [--sizes 360p,1080p] [--filters identity,edge]
                             [--frames 300] [--rounds 3] [--clip PATH] [--json PATH]

``filters``: ms per RGB frame per filter at 640x360 and 1080p, against the implementation of
commit ac605d4, kept below as ``before_apply``: NumPy fancy-indexed float32 padding,
``cv2.filter2D`` on the padded float32 frame (1 x K rows summed for kernels of area >= 50),
``np.rint``, ``np.clip`` and a casting copy: the computation that defines the CPU backend's
output. First the checks: ``pad_frame`` (now ``cv2.copyMakeBorder``) against ``border_index``
for every axis length 1..7 and radius 0..15 (halos wider than the frame, length-1 axes), and
every filter's output byte for byte against the old implementation, on a fresh random frame
per size and border. Times are medians over ``--repeat`` runs after a warm-up, with OpenCV's
default thread count.

``check`` (with ``--baseline``): the outputs of this checkout and of ROOT byte for byte, on
seeded random frames: every filter of the other parts, uint8 and uint16, every border, at
1080p and at an odd size; and the 4:2:0 conversion both ways at 8, 10 and 12 bits, limited
and full range, BT.601 / BT.709 / BT.2020.

``api``: ``Filter(spec, backend="cpu")(x)`` against ``cv2.filter2D(x, -1, taps)`` on a 1080p
RGB frame for K = 3, 5, 9, 15 (random float taps, box, Gaussian of sigma (K - 1) / 6; box and
Gaussian also with ``kernel="separable"``): ms per call, the wall time's median over
``--repeat`` calls, and process CPU ms per call.

``transcode``: ``--frames`` frames of a generated 1080p H.264 clip (``pipeline.make_clip``)
into libx264 ultrafast, through a 5x5 box, a Gaussian of sigma 2 (13 x 13) and random 3x3,
5x5 and 15x15 taps: streamconv on the CPU backend with the default colour path (yuv420p
planes converted by the backend; for box and Gaussian also with ``--kernel separable``) and
with ``--colour host`` (FFmpeg's scaler), the naive
serial PyAV + ``cv2.filter2D`` loop, and FFmpeg's ``convolution`` filter through PyAV's
filter graph on the yuv420p planes and on gbrp (with the scaler to and from it); and decoding
and encoding alone (``copy``, once per round: it has no filter). Each figure
is the process's CPU time per frame (every thread), the median of ``--rounds`` rounds; each
run is a process of its own (``cpu_runs.py``), the rounds interleaved.

With ``--baseline ROOT`` (a checkout of other code, e.g. ``git archive main | tar -x -C
ROOT``), ``api`` and ``transcode`` also time ROOT's streamconv in the same rounds, so before
and after are compared within one run on a shared machine. The load average is printed at
the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchinfo import commit

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.frames.borders import BORDER_MODES, border_index, pad_frame
from streamconv.chain.filters import COMBINE_MAGNITUDE, FilterStage, parse_filter, validate_taps

SIZES = {"360p": (360, 640, 3), "1080p": (1080, 1920, 3)}
FILTERS = ["identity", "box:size=3", "box:size=5", "gaussian:sigma=1", "gaussian:sigma=2", "edge",
           "sharpen", "custom31"]


def stage_for(spec: str) -> FilterStage:
    """A FilterStage from a spec; ``custom31`` is 31x31 random float taps (seeded, no symmetry)."""
    if spec == "custom31":
        taps = np.random.default_rng(31).normal(0.0, 1.0, (31, 31)) / 31
        taps[15, 15] += 1.0
        return FilterStage("custom", {}, (validate_taps(taps),))
    return parse_filter(spec)


# --- the implementation before this change (commit ac605d4), for equality and "before" times ---

def _before_pad(frame, radius, mode):
    height, width = frame.shape[:2]
    rows = border_index(np.arange(-radius, height + radius), height, mode)
    cols = border_index(np.arange(-radius, width + radius), width, mode)
    padded = frame.astype(np.float32, copy=False)[np.ix_(np.maximum(rows, 0), np.maximum(cols, 0))]
    if mode == "zero":
        padded[rows < 0] = 0
        padded[:, cols < 0] = 0
    return padded


def _before_correlate(padded, taps, height, width):
    size = taps.shape[0]
    radius = size // 2
    channels = padded.shape[2]
    image = padded[:, :, 0] if channels == 1 else padded
    if size == 1:
        result = image[:height, :width] * np.float32(taps[0, 0])
    elif size * size <= 49:
        full = cv2.filter2D(image, cv2.CV_32F, taps, borderType=cv2.BORDER_CONSTANT)
        result = full[radius:radius + height, radius:radius + width]
    else:
        result = np.zeros((height, width) + image.shape[2:], dtype=np.float32)
        for row in range(size):
            band = image[row:row + height]
            line = cv2.filter2D(band, cv2.CV_32F, taps[row:row + 1], borderType=cv2.BORDER_CONSTANT)
            result += line[:, radius:radius + width]
    return result.reshape(height, width, channels)


def before_apply(dst: np.ndarray, src: np.ndarray, stage: FilterStage, border: str) -> None:
    """One stage exactly as the CPU backend ran it before: (H, W, C) uint8 -> (H, W, C) uint8."""
    height, width = src.shape[:2]
    padded = _before_pad(src, stage.radius, border)
    sums = [_before_correlate(padded, taps, height, width) for taps in stage.taps]
    if stage.combine == COMBINE_MAGNITUDE:
        gx, gy = sums
        acc = np.sqrt(gx * gx + gy * gy)
    else:
        (acc,) = sums
    np.rint(acc, out=acc)
    np.clip(acc, 0, 255, out=acc)
    np.copyto(dst, acc, casting="unsafe")


# --- measurement ---

def median_ms(function, repeat: int) -> float:
    function()  # warm-up: allocations, OpenCV's thread pool
    samples = []
    for _ in range(repeat):
        begin = time.perf_counter()
        function()
        samples.append(time.perf_counter() - begin)
    return 1e3 * statistics.median(samples)


def check_padding(rng) -> None:
    """Raise SystemExit unless pad_frame equals the index-mapped padding on small frames."""
    for height in range(1, 8):
        for width in range(1, 8):
            for channels in (1, 3, 4):
                frame = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
                for radius in range(16):
                    for border in BORDER_MODES:
                        expected = _before_pad(frame, radius, border)
                        if not np.array_equal(pad_frame(frame, radius, border), expected):
                            raise SystemExit(f"pad_frame {frame.shape} radius {radius} {border} differs")


def check_equal(stage: FilterStage, shape, rng) -> None:
    """Raise SystemExit unless the backend equals the old implementation on every border."""
    for border in BORDER_MODES:
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        expected = np.empty_like(frame)
        before_apply(expected, frame, stage, border)
        got = CpuBackend([stage], border=border).apply(frame)
        if not np.array_equal(got, expected):
            count = int(np.count_nonzero(got != expected))
            raise SystemExit(f"{stage.describe()} {shape} {border}: {count} bytes differ "
                             "from the old implementation")



# --- the library, transcodes and the comparison with other code: each run in a process of its own

RUNS = Path(__file__).resolve().parent / "cpu_runs.py"
HERE = str(Path(__file__).resolve().parent.parent)
TRANSCODE_FILTERS = ["box5", "gauss2", "rand3", "rand5", "rand15"]
MODES = ["default", "separable", "host", "naive", "ffmpeg_yuv", "ffmpeg_rgb", "copy"]
API_FILTERS = [f"{kind}{size}" for size in (3, 5, 9, 15) for kind in ("rand", "box", "gauss")]


def child(task: dict) -> dict:
    """Run one ``cpu_runs.py`` task in a new process; its JSON result."""
    done = subprocess.run([sys.executable, str(RUNS), json.dumps(task)], capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{task['run']} {task.get('filter', '')} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def codes(args) -> dict[str, str]:
    """The checkouts timed: ``after`` (this one), and ``before`` (``--baseline``) if given."""
    before = {"before": str(Path(args.baseline).resolve())} if args.baseline else {}
    return before | {"after": HERE}


def check_against_baseline(args) -> None:
    """Raise SystemExit unless this checkout's outputs equal ``--baseline``'s byte for byte."""
    cases = []
    for name in sorted(set(API_FILTERS + TRANSCODE_FILTERS)):
        for dtype in ("uint8", "uint16"):
            for shape in ((1080, 1920, 3), (67, 133, 3)):
                cases += [{"kind": "filter", "filter": name, "dtype": dtype, "shape": shape,
                           "border": border} for border in BORDER_MODES]
    cases += [{"kind": "planes", "bits": bits, "space": space, "full": full, "shape": shape}
              for bits in (8, 10, 12) for space in (5, 1, 9) for full in (False, True)
              for shape in ((1080, 1920), (66, 134))]
    digests = {label: child({"code": code, "run": "output", "cases": cases, "seed": 7})
               for label, code in codes(args).items()}
    differing = [key for key, digest in digests["after"].items()
                 if digests["before"][key] != digest]
    if differing:
        raise SystemExit("outputs differ from the baseline's:\n" + "\n".join(differing))
    print(f"check: {len(digests['after'])} outputs equal byte for byte to the baseline's",
          file=sys.stderr)


def time_api(args) -> list[dict]:
    """The ``api`` rows: ms per call of ``Filter()(x)`` per checkout and of ``cv2.filter2D``."""
    rows = []
    for name in API_FILTERS:
        row = {"filter": name}
        for label, code in codes(args).items():
            result = child({"code": code, "run": "api", "filter": name, "size": [1080, 1920],
                            "repeat": args.repeat, "separable": label == "after"})
            row[f"{label}_ms"] = result["filter_ms"]
            row[f"{label}_cpu_ms"] = result["filter_cpu_ms"]
            row["cv2_ms"], row["cv2_cpu_ms"] = result["cv2_ms"], result["cv2_cpu_ms"]
            if "separable_ms" in result:
                row["separable_ms"] = result["separable_ms"]
                row["separable_cpu_ms"] = result["separable_cpu_ms"]
        print(f"  api {name}: {row}", file=sys.stderr)
        rows.append(row)
    return rows


def time_transcodes(args, clip: Path) -> list[dict]:
    """The ``transcode`` rows: per filter and mode, CPU ms per frame, the median of the rounds."""
    samples: dict[tuple[str, str], list[float]] = {}
    names = args.transcode_filters.split(",")
    runs = [(name, mode, label, code) for name in names for mode in args.modes.split(",")
            for label, code in (codes(args).items() if mode in ("default", "host")
                                else [("", HERE)])
            if mode != "copy" or name == names[0]]
    for round_number in range(args.rounds):
        for name, mode, label, code in runs:
            result = child({"code": code, "run": "transcode", "filter": name, "mode": mode,
                            "clip": str(clip)})
            if "skipped" in result:
                continue
            if result["frames"] != args.frames:
                raise SystemExit(f"{name} {mode}: {result['frames']} frames, not {args.frames}")
            key = (name, f"{mode} {label}".strip())
            samples.setdefault(key, []).append(1e3 * result["cpu_s"] / args.frames)
            print(f"  round {round_number + 1} {name} {key[1]}: {samples[key][-1]:.1f} CPU "
                  f"ms/frame, wall {result['wall_s']:.1f} s", file=sys.stderr)
    rows: dict[str, dict] = {}
    for (name, column), values in samples.items():
        rows.setdefault(name, {"filter": name})[column] = statistics.median(values)
        rows[name][column + " all"] = values
    return list(rows.values())


def print_api(rows: list[dict]) -> None:
    labels = [label for label in ("before", "after", "separable")
              if any(f"{label}_ms" in row for row in rows)]
    print(f"\nFilter()(x) on the CPU backend against cv2.filter2D, 1080p RGB uint8, ms per call "
          f"(wall median; process CPU), OpenCV {cv2.__version__} with {cv2.getNumThreads()} "
          "threads")
    print(f"{'filter':<10}" + "".join(f"{label:>18}" for label in labels + ["cv2.filter2D"])
          + f"{'after/cv2':>11}")
    for row in rows:
        cells = [f"{row[f'{label}_ms']:.1f}; {row[f'{label}_cpu_ms']:.1f}"
                 if f"{label}_ms" in row else "" for label in labels + ["cv2"]]
        print(f"{row['filter']:<10}" + "".join(f"{cell:>18}" for cell in cells)
              + f"{row['after_ms'] / row['cv2_ms']:>10.2f}x")


def print_transcodes(rows: list[dict], frames: int) -> None:
    columns = [key for key in rows[0] if key != "filter" and not key.endswith(" all")]
    print(f"\nTranscodes of {frames} frames of 1080p H.264 into libx264 ultrafast: process CPU "
          "ms per frame (median of the rounds)")
    print(f"{'filter':<8}" + "".join(f"{column:>16}" for column in columns))
    for row in rows:
        print(f"{row['filter']:<8}" + "".join(f"{row[column]:>16.1f}" if column in row
                                              else f"{'n/a':>16}" for column in columns))


def time_filters(args) -> list[dict]:
    """The ``filters`` part: checks, then ms per frame before and after, per size and filter."""
    rng = np.random.default_rng()
    check_padding(rng)
    rows = []
    for size in args.sizes.split(","):
        shape = SIZES[size]
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        out = np.empty_like(frame)
        for spec in args.filters.split(","):
            stage = stage_for(spec)
            check_equal(stage, shape, rng)
            backend = CpuBackend([stage])
            before = median_ms(partial(before_apply, out, frame, stage, "reflect101"), args.repeat)
            after = median_ms(partial(backend.apply_into, out, frame), args.repeat)
            rows.append({"size": size, "filter": stage.describe(), "before_ms": before,
                         "after_ms": after, "speedup": before / after})
            print(f"  {size} {stage.describe()}: {before:.2f} -> {after:.2f} ms", file=sys.stderr)
    print(f"\nCPU backend, ms per RGB frame (median of {args.repeat}), border reflect101, "
          f"OpenCV {cv2.__version__} with {cv2.getNumThreads()} threads, commit {commit()}; "
          f"output equal byte for byte to the old implementation on every border")
    print(f"{'size':<7}{'filter':<40}{'before':>9}{'after':>9}{'speedup':>9}")
    for row in rows:
        print(f"{row['size']:<7}{row['filter']:<40}{row['before_ms']:>9.2f}{row['after_ms']:>9.2f}"
              f"{row['speedup']:>8.1f}x")
    return rows


def clip_for(args) -> Path:
    """The transcode clip: ``--clip`` (made there if missing), else one in a temporary folder."""
    from pipeline import make_clip

    path = Path(args.clip) if args.clip else Path(tempfile.mkdtemp()) / "cpu1080.mp4"
    if not path.exists():
        make_clip(path, 1920, 1080, args.frames)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="filters,check,api,transcode")
    parser.add_argument("--baseline", default="", help="a checkout of other code to compare with")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--filters", default=",".join(FILTERS))
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clip", default="", help="the transcode clip (made there if missing)")
    parser.add_argument("--transcode-filters", default=",".join(TRANSCODE_FILTERS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", default="", help="also write the rows here")
    args = parser.parse_args()
    parts = args.parts.split(",")
    print(f"load average at the start: {os.getloadavg()}", file=sys.stderr)
    report = {"commit": commit(), "opencv": cv2.__version__, "opencv_threads": cv2.getNumThreads(),
              "cores": os.cpu_count(), "baseline": args.baseline, "load_start": os.getloadavg()}
    if "check" in parts and args.baseline:
        check_against_baseline(args)
    if "filters" in parts:
        report["filters"] = time_filters(args)
    if "api" in parts:
        report["api"] = time_api(args)
    if "transcode" in parts:
        report["transcode"] = time_transcodes(args, clip_for(args))
    report["load_end"] = os.getloadavg()
    print(f"load average: {report['load_start']} at the start, {report['load_end']} at the end; "
          f"{os.cpu_count()} cores")
    if "api" in report:
        print_api(report["api"])
    if "transcode" in report:
        print_transcodes(report["transcode"], args.frames)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
