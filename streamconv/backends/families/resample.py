"""The geometry stages' kernels, resample.cu: scale's tiles and tap tables, crop's copy.

Not a ``--kernel`` choice: :mod:`streamconv.backends.plan` gives every ``scale`` and ``crop`` stage
to this family whatever the other stages run as. A scale stage's tables (first source index and
float32 weights of every output column and row, :func:`streamconv.chain.resample.axis_taps`) go into
the module's ``__device__`` arrays, sized by the output; its tile is the one that does the least
work per output pixel within a block's 48 KB of shared memory (:func:`choose_tile`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chain.resample import AxisTaps, axis_taps
from .base import KernelPlan, StagePlan, cdiv

SOURCES = {"resample": "sm_75"}
"""Its kernel files in cuda/resample/ -> the oldest architecture each runs on."""
VARIANTS = ("resample",)
SAMPLE_BYTES = (1, 2)
SHARED_BYTES = 47 * 1024
"""Static shared memory a scale block may take (48 KB, less room for the driver's own)."""

_THREADS = 256
_TILE_WIDTHS = (32, 16, 8)
_TILE_HEIGHTS = (32, 16, 8, 4, 2, 1)
_CHUNKS = (16, 8, 4, 2, 1)
_SYNC_TAPS = 64
"""What a chunk's two barriers cost a column, in taps: an estimate, as are the cost's other
weights (benchmarks/scale_tiles.py times every tile that fits)."""


def prepare(stage, variant: str, sample_bytes: int) -> None:
    """Nothing shape-independent to prepare: the taps depend on the frame's size."""


@dataclass(frozen=True)
class Tile:
    """A scale block's shape: ``width`` x ``height`` output pixels, source rows staged ``chunk``
    at a time; ``span`` and ``rows``: the most source columns and rows any block reads."""

    width: int
    height: int
    chunk: int
    span: int
    rows: int

    def shared_bytes(self, channels: int) -> int:
        """The block's shared memory: the staged rows and the horizontal sums, float32."""
        return 4 * channels * (self.chunk * self.span + self.rows * self.width)

    def cost(self, columns: AxisTaps, rows: AxisTaps) -> float:
        """Work per output pixel, in taps: the horizontal taps of every row the block reads, the
        samples it stages, the barriers of its chunks and the vertical taps."""
        pixels = self.width * self.height
        horizontal = self.rows * (self.width * columns.taps + self.span)
        barriers = self.rows / self.chunk * self.width * _SYNC_TAPS
        return (horizontal + barriers + pixels * rows.taps) / pixels


def reach(taps: AxisTaps, tile: int) -> int:
    """The most source indices a block of ``tile`` consecutive outputs reads."""
    starts = taps.start.astype(np.int64)
    last = np.minimum(np.arange(0, len(starts), tile) + tile, len(starts)) - 1
    return int((starts[last] - starts[::tile]).max()) + taps.taps


def choose_tile(columns: AxisTaps, rows: AxisTaps, channels: int) -> Tile:
    """The cheapest tile (:meth:`Tile.cost`) whose shared memory fits, with the largest chunk
    that fits for its width and height."""
    best: Tile | None = None
    for width in _TILE_WIDTHS:
        span = reach(columns, width)
        for height in _TILE_HEIGHTS:
            most = reach(rows, height)
            fitting = (Tile(width, height, chunk, span, most) for chunk in _CHUNKS)
            tile = next((t for t in fitting if t.shared_bytes(channels) <= SHARED_BYTES), None)
            if tile is None:
                continue
            if best is None or tile.cost(columns, rows) < best.cost(columns, rows):
                best = tile
    if best is None:
        raise AssertionError("a 8 x 1 tile fits every reduction resample.py allows")
    return best


def kernel_plan(plan: StagePlan, shape: tuple[int, int, int], border_code: int) -> KernelPlan:
    """resample.cu's launch for (H, W, C) frames into the stage's output size (the border mode
    does not apply: scale replicates the edge)."""
    geometry = plan.stage.geometry
    height, width, channels = shape
    out_height, out_width, _ = geometry.output_shape(shape)
    common = {"CHANNELS": channels, "ELEM_BYTES": plan.sample_bytes, "OUT_W": out_width,
              "OUT_H": out_height}
    if geometry.kind == "crop":
        x, y, _, _ = geometry.window(shape)
        row_bytes = out_width * channels * plan.sample_bytes
        return KernelPlan(plan.variant, "resample", "crop", {**common, "CROP_X": x, "CROP_Y": y},
                          (128, 2, 1), (cdiv(row_bytes, 128), cdiv(out_height, 2), 1))
    rows = axis_taps(geometry.kernel, height, out_height)
    columns = axis_taps(geometry.kernel, width, out_width)
    tile = choose_tile(columns, rows, channels)
    constants = {"g_xstart": columns.start, "g_xweights": columns.weights.ravel(),
                 "g_ystart": rows.start, "g_yweights": rows.weights.ravel()}
    horizontal = cdiv(out_height, tile.height) * tile.rows * out_width * columns.taps
    defines = {**common, **scale_defines(columns, rows, tile)}
    block = (tile.width, _THREADS // tile.width, 1)
    return KernelPlan(plan.variant, "resample", "scale", defines, block,
                      (cdiv(out_width, tile.width), cdiv(out_height, tile.height), 1), constants,
                      products=channels * (horizontal + out_width * out_height * rows.taps))


def scale_defines(columns: AxisTaps, rows: AxisTaps, tile: Tile) -> dict[str, int]:
    """resample.cu's macros for the taps and the tile (the others: CHANNELS, ELEM_BYTES, OUT_W
    and OUT_H)."""
    return {"NTX": columns.taps, "NTY": rows.taps, "TILE_W": tile.width,
            "THREADS_Y": _THREADS // tile.width, "TILE_H": tile.height, "CHUNK": tile.chunk,
            "SPAN": tile.span, "ROWS": tile.rows}
