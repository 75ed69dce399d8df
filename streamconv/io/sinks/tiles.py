"""One OpenCV window tiling several sources' filtered frames in a grid, each tile its source's
newest frame.

Each source's pipeline sends to its own :class:`TileSink`, which only copies the frame into its
cell of the wall's canvas (host memory, BGR) and marks the wall changed: a writer thread never
waits for the window, so a slow window costs a live source dropped frames, not queued ones. The
GUI thread (:mod:`streamconv.io.sinks.display`'s, which every OpenCV window call goes through) shows
the canvas when it has changed, between pumping events.

Keys as for the single window: q or Esc stop every source (each finishes its output), space
pauses the window (file sources wait; live ones keep running and recording), o toggles each
tile's overlay (its index, source, fps and drops), f switches every source to the next chain.
Closing the window quits like q. The window closes once every tile's source has ended.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from typing import Any, Sequence

import cv2
import numpy as np

from ...frames.slots import FrameMeta
from .display import (_CYCLE_KEY, _OVERLAY_KEY, _PAUSE_KEY, _QUIT_KEYS, _GuiThread, check_display,
                      destroy_window, open_window, to_bgr, window_visible)
from .overlay import draw_overlay, overlay_box, recent_fps
from .sink import FanoutSink, NullSink, Sink
from .steering import RunHandle
from ..sources.source import Source

log = logging.getLogger(__name__)


def grid(count: int) -> tuple[int, int]:
    """(rows, columns) for ``count`` tiles: as square as can be, filled row by row."""
    columns = max(1, math.ceil(math.sqrt(count)))
    return max(1, math.ceil(count / columns)), columns


class TileSink(Sink):
    """One source's tile of a :class:`TileWall`; made by :meth:`TileWall.add`."""

    name = "tile"

    def __init__(self, wall: "TileWall", index: int, shape: tuple[int, ...], label: str) -> None:
        self.wall, self.index, self.shape, self.label = wall, index, shape, label
        self.run: RunHandle | None = None
        self.ended = False
        self.shown_at: deque[float] = deque(maxlen=31)
        self._live = False  # the attached run's source is live (set by attach)

    def attach(self, run: RunHandle) -> None:
        """Keep the run's handle (:class:`streamconv.io.sinks.steering.RunHandle`): the wall's
        keys stop the run and swap its filters."""
        self.run = run
        self._live = run.status().live  # once, not per frame

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Copy one (H, W, C) uint8 or uint16 RGB host frame into this tile; waits while the window
        is paused, for a source that is not live."""
        while self.wall.paused and not self._live and not self.wall.quit_requested:
            if self.run is not None and self.run.status().stopping:
                break
            time.sleep(0.05)
        self.wall.put(self.index, frame)
        self.shown_at.append(time.perf_counter())
        self.frames_written += 1

    def overlay_text(self) -> list[str]:
        """The tile's overlay: its index and source; fps over recent frames and frames dropped."""
        fps = recent_fps(self.shown_at)
        dropped = self.run.status().dropped if self.run is not None else 0
        state = "  ended" if self.ended else ""
        return [f"{self.index}: {self.label}", f"{fps:5.1f} fps  dropped {dropped}{state}"]

    def close(self) -> None:
        """This source has ended: its tile keeps its last frame; the window closes after the last
        tile."""
        if not self.ended:
            self.ended = True
            self.wall.tile_ended()

    def describe(self) -> str:
        return f"tile {self.index} of window {self.wall.title!r}"


class TileWall:
    """One window of tiles, one per source added, in a grid (:func:`grid`) of equal cells.

    Args:
        title: the window title (also OpenCV's window name).
        overlay: start with each tile's overlay shown (``o`` toggles it).
        filter_cycle: (label, filter chain) pairs that ``f`` steps every source through.

    A cell is as large as the largest frame a tile was added for (a source's, or its chain's
    output); a smaller frame sits at its cell's top left, a larger one (a source that changed
    size, another chain) is scaled down to fit. The canvas is an
    (rows * cell H, columns * cell W, 3) uint8 BGR host array, laid out when the first frame
    arrives (every source is added before any runs).

    Raises:
        DisplayError: no window can be opened here (see
            :func:`streamconv.io.sinks.display.check_display`).
    """

    def __init__(self, *, title: str = "streamconv", overlay: bool = True,
                 filter_cycle: Sequence[tuple[str, Sequence[Any]]] = ()) -> None:
        check_display()
        self.title, self.overlay = title, overlay
        self.paused = False
        self.frames_shown = 0
        self.tiles: list[TileSink] = []
        self._cycle, self._cycle_index = list(filter_cycle), 0
        self._lock = threading.Lock()
        self._canvas: np.ndarray | None = None
        self._cell = (0, 0)
        self._columns = 1  # the grid's, with the cell size once the canvas is laid out
        self._changed = False
        self._quit = threading.Event()
        self._open = self._closed = False
        self._gui = _GuiThread.get()

    def add(self, source: Source, label: str, sink: Sink | None = None, *,
            shape: tuple[int, ...] | None = None) -> Sink:
        """A new tile for ``source``; with ``sink`` (the source's own output), a sink that sends
        to the tile first, then to it. ``shape``: the (H, W, C) of the frames the tile is sent
        (the output of a chain that changes the size); None: the source's. It sets the cell
        size."""
        with self._lock:
            tile = TileSink(self, len(self.tiles), shape or source.shape, label)
            self.tiles.append(tile)
            self._canvas = None  # laid out again, for one more tile
        if not self._open:
            self._gui.call(self._create)
        return tile if sink is None or isinstance(sink, NullSink) else FanoutSink([tile, sink])

    @property
    def quit_requested(self) -> bool:
        """True once q, Esc or closing the window asked every source to stop."""
        return self._quit.is_set()

    def size(self) -> tuple[int, int]:
        """The window's (height, width) in pixels: the grid of cells of the largest frame's size."""
        rows, columns = grid(len(self.tiles))
        height = max((t.shape[0] for t in self.tiles), default=0)
        width = max((t.shape[1] for t in self.tiles), default=0)
        return rows * height, columns * width

    # -------------------------------------------------------- frames (writer threads)

    def put(self, index: int, frame: np.ndarray) -> None:
        """Copy an (H, W, C) uint8 or uint16 RGB host frame into tile ``index``'s cell, as BGR."""
        with self._lock:
            if self._canvas is None:
                height, width = self.size()
                rows, self._columns = grid(len(self.tiles))
                self._canvas = np.zeros((height, width, 3), np.uint8)
                self._cell = (height // rows, width // self._columns)
            cell_h, cell_w = self._cell
            row, column = divmod(index, self._columns)
            cell = self._canvas[row * cell_h:(row + 1) * cell_h,
                                column * cell_w:(column + 1) * cell_w]
            _fit(frame, cell)
            self._changed = True

    def tile_ended(self) -> None:
        """A tile's source ended; once every tile's has, the window closes."""
        if all(tile.ended for tile in self.tiles):
            self.close()

    # -------------------------------------------------------- on the GUI thread

    def _create(self) -> None:
        open_window(self.title)
        self._open = True
        self._gui.listeners[self.title] = self._on_event

    def _on_event(self, key: int) -> None:
        if key != -1:
            self._on_key(key)
        if self._open and self.frames_shown and not window_visible(self.title):
            self._open = False
            self._gui.listeners.pop(self.title, None)
            self._request_quit("window closed")
        if self._open and self._changed and not self.paused:
            self._show()

    def _show(self) -> None:
        with self._lock:
            if self._canvas is None:
                return
            shown = self._canvas.copy()  # the writers go on filling the canvas while it is painted
            self._changed = False
        if self.overlay:
            self._draw_overlays(shown)
        cv2.imshow(self.title, shown)
        self.frames_shown += 1

    def _draw_overlays(self, canvas: np.ndarray) -> None:
        cell_h, cell_w = self._cell
        _, _, width, height = overlay_box(cell_w)
        for tile in self.tiles:
            row, column = divmod(tile.index, self._columns)
            top, left = row * cell_h, column * cell_w
            draw_overlay(canvas, tile.overlay_text(), left, top, width, min(height, cell_h))

    def _on_key(self, key: int) -> None:
        if key in _QUIT_KEYS:
            self._request_quit("quit key")
        elif key == _PAUSE_KEY:
            self.paused = not self.paused
            log.info("display %s", "paused" if self.paused else "resumed")
        elif key == _OVERLAY_KEY:
            self.overlay = not self.overlay
            self._changed = True
        elif key == _CYCLE_KEY:
            self._next_filter()

    def _request_quit(self, reason: str) -> None:
        log.info("display: %s, stopping every source", reason)
        self._quit.set()
        for tile in self.tiles:
            if tile.run is not None:
                tile.run.stop()

    def _next_filter(self) -> None:
        if len(self._cycle) < 2:
            log.info("display: no other filter chain to switch to")
            return
        self._cycle_index = (self._cycle_index + 1) % len(self._cycle)
        label, chain = self._cycle[self._cycle_index]
        for tile in self.tiles:
            if tile.run is not None and not tile.ended:
                tile.run.swap_chain(chain, label)

    def _destroy(self) -> None:
        self._gui.listeners.pop(self.title, None)
        if self._open:
            self._open = False
            destroy_window(self.title)

    def close(self) -> None:
        """Close the window; safe to call more than once, from any thread."""
        if self._closed:
            return
        self._closed = True
        self._gui.call(self._destroy)

    def describe(self) -> str:
        rows, columns = grid(len(self.tiles))
        return f"window {self.title!r} ({len(self.tiles)} tiles, {rows}x{columns})"


def _fit(frame: np.ndarray, cell: np.ndarray) -> None:
    """Put an (H, W, C) RGB frame into ``cell`` ((h, w, 3) uint8 BGR view) at its top left,
    scaled down (aspect kept) if it is larger; the rest of the cell is black."""
    height, width = frame.shape[:2]
    cell_h, cell_w = cell.shape[:2]
    if height <= cell_h and width <= cell_w:
        to_bgr(frame, cell[:height, :width])
        return
    scale = min(cell_h / height, cell_w / width)
    bgr = np.empty((height, width, 3), np.uint8)
    to_bgr(frame, bgr)
    fitted = cv2.resize(bgr, (max(1, int(width * scale)), max(1, int(height * scale))),
                        interpolation=cv2.INTER_AREA)
    cell[...] = 0
    cell[:fitted.shape[0], :fitted.shape[1]] = fitted
