"""CPU backend: ms per frame per filter at 640x360 and 1080p RGB, against the implementation it replaced.

    python benchmarks/cpu.py [--repeat 7] [--sizes 360p,1080p] [--filters identity,edge] [--json PATH]

``before`` is the CPU backend as of commit ac605d4, kept below as ``before_apply``: NumPy
fancy-indexed float32 padding, ``cv2.filter2D`` on the padded float32 frame (1 x K rows
summed for kernels of area >= 50), ``np.rint``, ``np.clip`` and a casting copy.
First the checks: ``pad_frame`` (now ``cv2.copyMakeBorder``) against ``border_index`` for
every axis length 1..7 and radius 0..15 (halos wider than the frame, length-1 axes), and
every filter's output byte for byte against the old implementation, on a fresh random
frame per size and border. Times are medians over ``--repeat`` runs after a warm-up, with
OpenCV's default thread count (the old code used OpenCV's threads inside ``filter2D``;
the new one also runs bands of rows on that many threads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchinfo import commit  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.frames.borders import BORDER_MODES, border_index, pad_frame  # noqa: E402
from streamconv.chain.filters import COMBINE_MAGNITUDE, FilterStage, parse_filter, validate_taps  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--filters", default=",".join(FILTERS))
    parser.add_argument("--json", default="", help="also write the rows here")
    args = parser.parse_args()
    sizes = args.sizes.split(",")
    specs = args.filters.split(",")
    rng = np.random.default_rng()
    check_padding(rng)

    rows = []
    for size in sizes:
        shape = SIZES[size]
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        out = np.empty_like(frame)
        for spec in specs:
            stage = stage_for(spec)
            check_equal(stage, shape, rng)
            backend = CpuBackend([stage])
            before = median_ms(lambda: before_apply(out, frame, stage, "reflect101"), args.repeat)
            after = median_ms(lambda: backend.apply_into(out, frame), args.repeat)
            rows.append({"size": size, "filter": stage.describe(), "before_ms": before, "after_ms": after,
                         "speedup": before / after})
            print(f"  {size} {stage.describe()}: {before:.2f} -> {after:.2f} ms", file=sys.stderr)

    if args.json:
        Path(args.json).write_text(json.dumps({"commit": commit(), "opencv": cv2.__version__,
                                               "opencv_threads": cv2.getNumThreads(),
                                               "repeat": args.repeat, "rows": rows}, indent=1) + "\n")
    print(f"\nCPU backend, ms per RGB frame (median of {args.repeat}), border reflect101, "
          f"OpenCV {cv2.__version__} with {cv2.getNumThreads()} threads, commit {commit()}; "
          f"output equal byte for byte to the old implementation on every border")
    print(f"{'size':<7}{'filter':<40}{'before':>9}{'after':>9}{'speedup':>9}")
    for row in rows:
        print(f"{row['size']:<7}{row['filter']:<40}{row['before_ms']:>9.2f}{row['after_ms']:>9.2f}"
              f"{row['speedup']:>8.1f}x")


if __name__ == "__main__":
    main()
