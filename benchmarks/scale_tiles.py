"""The scale kernel's tiles, timed: what streamconv/backends/families/resample.py's choose_tile is
held to. 4K -> 1080p RGB 8-bit (and 1080p -> 4K), every tile that fits in a block's shared memory,
each checked against the CPU backend (poisoned outputs), then timed with CUDA events (kernels
only, four rotating frames), exact and (shrinking) with FUSED 1.

    python benchmarks/scale_tiles.py [--kernels lanczos3] [--both] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.backends.cuda.backend import CudaBackend  # noqa: E402
from streamconv.backends.families import resample  # noqa: E402
from streamconv.backends.plan import plan_chain, precompile_plans  # noqa: E402
from streamconv.bench.scale import swapped_stage  # noqa: E402
from streamconv.chain.filters import parse_filter  # noqa: E402
from streamconv.bench.timing import poisoned_run, time_launches  # noqa: E402
from streamconv.chain.resample import axis_taps  # noqa: E402

CASES = (((2160, 3840, 3), (1080, 1920)), ((1080, 1920, 3), (2160, 3840)))


def tiles(columns, rows, channels: int):
    """Every (width, height) tile whose shared memory fits, with the largest chunk that does."""
    for width in (64, 32, 16):
        span = resample.reach(columns, width)
        for height in (64, 32, 16, 8):
            most = resample.reach(rows, height)
            fitting = [resample.Tile(width, height, chunk, span, most) for chunk in (16, 8, 4)]
            tile = next((t for t in fitting if t.shared_bytes(channels) <= resample.SHARED_BYTES), None)
            if tile is not None:
                yield tile


def variants(kernel: str, shape, size, fused: tuple[int, ...]):
    """(stage, tile, cost, chosen, FUSED, the launch) of every tile of one case."""
    stage = parse_filter(f"scale:w={size[1]},h={size[0]},kernel={kernel}")
    launch = plan_chain([stage]).kernel_plans(shape, 2)[0]
    columns, rows = axis_taps(kernel, shape[1], size[1]), axis_taps(kernel, shape[0], size[0])
    chosen = resample.choose_tile(columns, rows, shape[2])
    for tile in tiles(columns, rows, shape[2]):
        for flag in fused:
            defines = {**launch.defines, **resample.scale_defines(columns, rows, tile), "FUSED": flag}
            grid = (-(-size[1] // tile.width), -(-size[0] // tile.height), 1)
            yield stage, tile, tile.cost(columns, rows), tile == chosen, flag, replace(
                launch, defines=defines, block=(tile.width, 256 // tile.width, 1), grid=grid)


def sweep(kernel: str, shape, size, fused: tuple[int, ...], rng) -> list[dict]:
    """Every tile of one case checked against the CPU backend and timed."""
    found = []
    cases = list(variants(kernel, shape, size, fused))
    frame = rng.integers(0, 256, shape, dtype=np.uint8)
    expected = CpuBackend([cases[0][0]]).apply(frame)
    with CudaBackend([cases[0][0]]) as backend:
        precompile_plans([case[-1] for case in cases], backend.arch, workers=16)
        slots = backend.allocate_slots(shape, 4)
        for slot in slots:
            slot.host_in[:] = rng.integers(0, 256, shape, dtype=np.uint8)
        for stage, tile, cost, chosen, flag, launch in cases:
            with swapped_stage(backend, stage, shape, np.uint8, launch.defines, launch.block, launch.grid):
                got = poisoned_run(backend, slots[0], frame)
                with backend.activated():
                    for slot in slots:
                        slot.device.upload(None)  # now, synchronously
                    ms = time_launches(backend, slots) * 1e3
            lsb = int(np.abs(got.astype(int) - expected.astype(int)).max())
            found.append({"kernel": kernel, "case": f"{shape[1]}x{shape[0]} -> {size[1]}x{size[0]}",
                          "tile": f"{tile.width}x{tile.height}/{tile.chunk}", "fused": flag, "ms": ms,
                          "lsb": lsb, "cost": round(cost, 1), "chosen": chosen})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", default="lanczos3")
    parser.add_argument("--both", action="store_true", help="1080p -> 4K too")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    needs.gpu()
    rng = np.random.default_rng()
    cases = CASES if args.both else CASES[:1]
    rows = [row for kernel in args.kernels.split(",") for (shape, size), fused in zip(cases, ((0, 1), (0,)))
            for row in sweep(kernel, shape, size, fused, rng)]
    print(f"{'kernel':<10}{'case':<24}{'tile':<12}{'fused':>6}{'ms':>9}{'LSB':>5}{'cost':>8}  chosen")
    for row in sorted(rows, key=lambda r: (r["kernel"], r["case"], r["fused"], r["ms"])):
        print(f"{row['kernel']:<10}{row['case']:<24}{row['tile']:<12}{row['fused']:>6}{row['ms']:>9.4f}{row['lsb']:>5}"
              f"{row['cost']:>8}  {'*' if row['chosen'] else ''}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(needs.run(main))
