"""An OpenCV window as a sink: the filtered frame (or input | output), an fps/latency overlay, keys.

Keys: ``q`` or Esc quit (the pipeline stops and finishes its output), space pauses, ``o``
toggles the overlay, ``f`` switches to the next filter chain of ``filter_cycle`` without
restarting. Closing the window quits like ``q``.

Every OpenCV GUI call of the process runs on one thread (``_GuiThread``): Qt and GTK tie a
window to the thread that made it, and that thread must keep pumping events while the
pipeline waits (a stalled camera, a pause), or the window freezes and cannot be closed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import queue
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Sequence

import cv2
import numpy as np

from ...errors import DisplayError
from ...frames.slots import FrameMeta
from .overlay import draw_overlay, overlay_box, recent_fps
from .sink import Sink
from .steering import RunHandle, RunStatus

log = logging.getLogger(__name__)

KEYS_HELP = "q/Esc quit, space pause, o overlay, f next filter"
_QUIT_KEYS = {ord("q"), ord("Q"), 27}
_PAUSE_KEY, _OVERLAY_KEY, _CYCLE_KEY = ord(" "), ord("o"), ord("f")

# ------------------------------------------------------------------ availability


def gui_backend() -> str:
    """The GUI toolkit OpenCV was built with (``QT5``, ``GTK3``, ``WIN32UI``...), or ``NONE``."""
    for line in cv2.getBuildInformation().splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip() == "GUI":
            return value.strip() or "NONE"
    return "UNKNOWN"


def check_display() -> None:
    """Raise DisplayError, naming the cause, unless a window can be opened here.

    Checks the OpenCV build for a GUI, and on Linux that DISPLAY or WAYLAND_DISPLAY is set
    and that the X server named by DISPLAY accepts a connection (Qt aborts the whole
    process when it cannot connect, so this must be known before any window call).
    """
    backend = gui_backend()
    if backend == "NONE":
        raise DisplayError(f"OpenCV {cv2.__version__} has no GUI support (GUI: NONE; the "
                           "opencv-python-headless build?); install opencv-python to open a window")
    if not sys.platform.startswith("linux"):
        return
    check_import_order(backend)
    display, wayland = os.environ.get("DISPLAY"), os.environ.get("WAYLAND_DISPLAY")
    if not display and not wayland:
        raise DisplayError("no display: neither DISPLAY nor WAYLAND_DISPLAY is set (run in a "
                           "desktop "
                           "session, or use -o to record instead of --display)")
    if display and not _x_server_reachable(display):
        raise DisplayError(f"cannot connect to the X display DISPLAY={display!r}")


def check_import_order(backend: str | None = None) -> None:
    """Raise DisplayError if PyAV was imported before OpenCV with OpenCV's Qt GUI on Linux.

    Both wheels bundle their own libxcb; when PyAV's copy is loaded first, Qt's window
    calls never return. streamconv imports cv2 before av itself; a program that imports
    av before streamconv or cv2 gets this error instead of a frozen window.
    """
    backend = backend or gui_backend()
    if not backend.upper().startswith("QT") or not sys.platform.startswith("linux"):
        return
    order = list(sys.modules)  # insertion order is import order
    if "av" in sys.modules and "cv2" in sys.modules and order.index("av") < order.index("cv2"):
        raise DisplayError("PyAV was imported before OpenCV; OpenCV's Qt windows hang then (both "
                           "bundle libxcb): import cv2 or streamconv before av")


def _x_server_reachable(display: str) -> bool:
    """Whether libX11 can open ``display``; True when libX11 is not there to ask."""
    name = ctypes.util.find_library("X11")
    if name is None:
        return True
    try:
        xlib = ctypes.CDLL(name)
    except OSError:
        return True
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    handle = xlib.XOpenDisplay(display.encode())
    if not handle:
        return False
    xlib.XCloseDisplay(handle)
    return True


# ------------------------------------------------------------------ the GUI thread


class _GuiThread:
    """The one thread that makes every OpenCV GUI call; pumps window events between jobs."""

    _instance: "_GuiThread | None" = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls) -> "_GuiThread":
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.listeners: dict[str, Callable[[int], None]] = {}
        thread = threading.Thread(target=self._loop, name="streamconv-gui", daemon=True)
        thread.start()

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run ``function(*args)`` on the GUI thread and return its result (or raise its error)."""
        done = threading.Event()
        box: dict[str, Any] = {}
        self._jobs.put((function, args, done, box))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def pump(self) -> None:
        """Process window events once and hand the key pressed, or -1, to every listener."""
        key = cv2.waitKeyEx(1)
        for listener in list(self.listeners.values()):
            listener(key)

    def _loop(self) -> None:
        while True:
            try:
                # With a window open, wake every 10 ms to keep it responsive.
                job = self._jobs.get(timeout=0.01) if self.listeners else self._jobs.get()
            except queue.Empty:
                job = None
            if job is not None:
                function, args, done, box = job
                try:
                    box["result"] = function(*args)
                except BaseException as exc:  # re-raised in the caller's thread
                    box["error"] = exc
                finally:
                    done.set()
            if self.listeners and job is None:
                try:
                    self.pump()
                except cv2.error as exc:  # the toolkit went away (all windows closed)
                    log.debug("GUI pump: %s", exc)


# ------------------------------------------------------------------ windows (GUI thread only)


def open_window(title: str) -> None:
    """Open an autosized window named ``title``; DisplayError, with the toolkit's reason, if it
    cannot be."""
    try:
        cv2.namedWindow(title, cv2.WINDOW_AUTOSIZE | cv2.WINDOW_GUI_NORMAL)
    except cv2.error as exc:
        raise DisplayError(f"cannot open a window ({gui_backend()}): "
                           f"{str(exc).strip().splitlines()[-1]}") from None


def window_visible(title: str) -> bool:
    """Whether the window named ``title`` is still on screen (False once the user closed it)."""
    try:
        return cv2.getWindowProperty(title, cv2.WND_PROP_VISIBLE) >= 1
    except cv2.error:  # Qt drops its state once the last window closed
        return False


def destroy_window(title: str) -> None:
    """Close the window named ``title``; a toolkit already gone is not an error."""
    try:
        cv2.destroyWindow(title)
        cv2.waitKey(1)  # let the toolkit process the destruction
    except cv2.error as exc:
        log.debug("destroying the window: %s", exc)


# ------------------------------------------------------------------ the sink


class DisplaySink(Sink):
    """Shows frames in an OpenCV window, with an fps/latency overlay and keyboard controls.

    Args:
        title: the window title (also OpenCV's window name).
        side_by_side: show the input on the left and the filtered frame on the right.
        overlay: start with the overlay shown (``o`` toggles it).
        filter_cycle: (label, filter chain) pairs that ``f`` steps through; the first is
            the chain the pipeline starts with.

    Frames arrive as (H, W, C) uint8 RGB (or gray, RGBA) host arrays and are converted to
    BGR into a window-sized host canvas ((H, W, 3), or (H, 2W, 3) side by side).

    Pause: a file stops being read while paused; a live source keeps running (and recording)
    while the window holds its frame. Latency in the overlay is from capture (or, for
    files, from the start of reading the frame) until the frame is on screen.

    Raises:
        DisplayError: no window can be opened here (see :func:`check_display`).
    """

    name = "display"

    def __init__(self, *, title: str = "streamconv", side_by_side: bool = False,
                 overlay: bool = True,
                 filter_cycle: Sequence[tuple[str, Sequence[Any]]] = ()) -> None:
        check_display()
        self.title = title
        self.side_by_side = side_by_side
        self.overlay = overlay
        self.paused = False
        self.frames_shown = 0
        self._cycle = list(filter_cycle)
        self._cycle_index = 0
        self._run: RunHandle | None = None
        self._live = False
        self._quit = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self._open = False
        self._closed = False
        self._canvas: np.ndarray | None = None
        self._latency: deque[float] = deque(maxlen=120)
        self._shown_at: deque[float] = deque(maxlen=31)
        self._gui = _GuiThread.get()
        self._gui.call(self._create)

    # -------------------------------------------------------- on the GUI thread

    def _create(self) -> None:
        open_window(self.title)
        self._open = True
        self._gui.listeners[self.title] = self._on_event

    def _show(self, canvas: np.ndarray) -> None:
        if not self._open:
            return
        cv2.imshow(self.title, canvas)
        self._gui.pump()  # paints it, and reads a key

    def _on_event(self, key: int) -> None:
        if key != -1:
            self._on_key(key)
        if self._open and self.frames_shown and not self._visible():
            self._open = False
            self._gui.listeners.pop(self.title, None)
            self._request_quit("window closed")

    def _visible(self) -> bool:
        return window_visible(self.title)

    def _on_key(self, key: int) -> None:
        if key in _QUIT_KEYS:
            self._request_quit("quit key")
        elif key == _PAUSE_KEY:
            self.paused = not self.paused
            if self.paused:
                self._resume.clear()
            else:
                self._resume.set()
            log.info("display %s", "paused" if self.paused else "resumed")
        elif key == _OVERLAY_KEY:
            self.overlay = not self.overlay
        elif key == _CYCLE_KEY:
            self._next_filter()

    def _destroy(self) -> None:
        self._gui.listeners.pop(self.title, None)
        if self._open:
            self._open = False
            destroy_window(self.title)

    # -------------------------------------------------------- control

    def _request_quit(self, reason: str) -> None:
        log.info("display: %s, stopping", reason)
        self._quit.set()
        self._resume.set()
        if self._run is not None:
            self._run.stop()

    def _next_filter(self) -> None:
        if len(self._cycle) < 2 or self._run is None:
            log.info("display: no other filter chain to switch to")
            return
        self._cycle_index = (self._cycle_index + 1) % len(self._cycle)
        label, chain = self._cycle[self._cycle_index]
        self._run.swap_chain(chain, label)

    @property
    def quit_requested(self) -> bool:
        """True once q, Esc or closing the window asked to stop."""
        return self._quit.is_set()

    def attach(self, run: RunHandle) -> None:
        """Keep the run's handle (:class:`streamconv.io.sinks.steering.RunHandle`) to stop it
        and swap its filters; a live source changes how pause works."""
        self._run = run
        self._live = run.status().live
        if self._cycle:
            run.name_chain(self._cycle[0][0])

    # -------------------------------------------------------- frames (writer thread)

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Show one (H, W, C) uint8 RGB host frame (the filtered one; no input beside it)."""
        self.send_with_input(frame, None, meta)

    def send_with_input(self, frame: np.ndarray, source_frame: np.ndarray | None,
                        meta: FrameMeta) -> None:
        """Show the filtered frame, beside ``source_frame`` when side by side; both (H, W, C)
        uint8 RGB host arrays, read during the call only. Blocks while paused (file sources)."""
        if self.paused and not self._live:
            while not self._resume.wait(0.05):
                if self._run is not None and self._run.status().stopping:
                    break
        if self._quit.is_set() or not self._open or self.paused:
            return
        canvas = self._compose(frame, source_frame)
        if self.overlay:
            self._draw_overlay(canvas)
        self._gui.call(self._show, canvas)
        now = time.perf_counter()
        if meta.captured is not None:
            self._latency.append(now - meta.captured)
        self._shown_at.append(now)
        self.frames_shown += 1
        self.frames_written += 1

    def _compose(self, frame: np.ndarray, source_frame: np.ndarray | None) -> np.ndarray:
        height, width = frame.shape[:2]
        columns = 2 if self.side_by_side else 1
        shape = (height, width * columns, 3)
        if self._canvas is None or self._canvas.shape != shape:
            self._canvas = np.zeros(shape, np.uint8)
        canvas = self._canvas
        if self.side_by_side:
            if source_frame is not None and source_frame.shape[:2] != frame.shape[:2]:
                # A scale or crop stage changed the size: the input is shown at the output's.
                source_frame = cv2.resize(source_frame, (width, height),
                                          interpolation=cv2.INTER_AREA)
            if source_frame is not None:
                to_bgr(source_frame, canvas[:, :width])
            else:
                canvas[:, :width] = 0
            to_bgr(frame, canvas[:, width:])
        else:
            to_bgr(frame, canvas)
        return canvas

    def overlay_text(self) -> list[str]:
        """The overlay's lines: fps and latency p50/p95 over recent frames; filter and drops."""
        first = f"{recent_fps(self._shown_at):5.1f} fps"
        if self._latency:
            p50, p95 = np.percentile(np.asarray(self._latency) * 1e3, (50, 95))
            first += f"  latency p50 {p50:.1f} ms  p95 {p95:.1f} ms"
        status = self._run.status() if self._run is not None else RunStatus()
        label, dropped = status.label or "", status.dropped
        second = f"{label}  dropped {dropped}" if label else f"dropped {dropped}"
        return [first, second]

    def _draw_overlay(self, canvas: np.ndarray) -> None:
        panel_width = canvas.shape[1] // 2 if self.side_by_side else canvas.shape[1]
        draw_overlay(canvas, self.overlay_text(), *overlay_box(panel_width))

    # -------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Close the window; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._resume.set()
        self._gui.call(self._destroy)

    @property
    def shows_input(self) -> bool:
        """Side by side, the input is shown beside each output."""
        return self.side_by_side

    def describe(self) -> str:
        mode = "input | output" if self.side_by_side else "output"
        return f"window {self.title!r} ({mode}, {gui_backend()})"


def to_bgr(frame: np.ndarray, out: np.ndarray) -> None:
    """Convert an (H, W, C) uint8 or uint16 RGB/gray/RGBA host frame into ``out`` ((H, W, 3)
    uint8 BGR view); 16-bit samples are shown by their high byte."""
    if frame.dtype == np.uint16:
        frame = (frame >> 8).astype(np.uint8)
    channels = 1 if frame.ndim == 2 else frame.shape[2]
    if channels == 1:
        out[...] = frame.reshape(frame.shape[0], frame.shape[1], 1)
    elif channels == 4:
        out[...] = frame[:, :, 2::-1]
    else:
        result = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR, dst=out)
        if not np.shares_memory(result, out):  # builds that refuse a strided dst allocate instead
            out[...] = result
