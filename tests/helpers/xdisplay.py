"""A virtual X server for window tests: start Xvfb, read its screen, find windows, press keys,
close.

The screen is read from the framebuffer file Xvfb keeps with ``-fbdir`` (XWD format), so
no screenshot tool is needed. Keys go through xdotool (the XTEST extension, as a user's
would); closing a window sends WM_DELETE_WINDOW through libX11, as a window manager's
close button does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from helpers.cli import REPO
from streamconv.io.sinks.display import gui_backend
from typing import Iterator
import contextlib
import pytest
import sys


class VirtualDisplay:
    """An Xvfb server on a free display number, with its screen readable as an array.

    Args:
        width, height: screen size in pixels (24-bit colour).
    """

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        self.size = (width, height)
        self._folder = tempfile.TemporaryDirectory(prefix="xvfb-")
        self.process: subprocess.Popen | None = None
        self.name = ""

    def start(self) -> "VirtualDisplay":
        width, height = self.size
        for number in range(91, 400):
            if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():
                continue
            process = subprocess.Popen(
                ["Xvfb", f":{number}", "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
                 "-fbdir", self._folder.name, "-noreset"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and process.poll() is None:
                if Path(f"/tmp/.X11-unix/X{number}").exists() and self._framebuffer().exists():
                    self.process, self.name = process, f":{number}"
                    return self
                time.sleep(0.05)
            process.kill()  # another server took the number meanwhile: try the next
            process.wait()
        raise RuntimeError("no free X display number for Xvfb")

    def _framebuffer(self) -> Path:
        return Path(self._folder.name) / "Xvfb_screen0"

    @property
    def env(self) -> dict[str, str]:
        """os.environ with DISPLAY pointing here (and no Wayland)."""
        env = dict(os.environ, DISPLAY=self.name)
        env.pop("WAYLAND_DISPLAY", None)
        return env

    def screen(self) -> np.ndarray:
        """The whole screen as an (H, W, 3) uint8 BGR array."""
        return read_xwd(self._framebuffer().read_bytes())

    def stable_screen(self, *, attempts: int = 40) -> np.ndarray:
        """The screen, read twice in a row without a change (so not caught mid-repaint)."""
        previous = self.screen()
        for _ in range(attempts):
            time.sleep(0.005)
            current = self.screen()
            if np.array_equal(current, previous):
                return current
            previous = current
        raise AssertionError(f"the screen kept changing over {attempts} reads")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        self._folder.cleanup()


def read_xwd(data: bytes) -> np.ndarray:
    """Decode a 24/32-bit TrueColor XWD image into an (H, W, 3) uint8 BGR array."""
    fields = struct.unpack(">25I", data[:100])
    header_size, width, height = fields[0], fields[4], fields[5]
    byte_order, bits_per_pixel, bytes_per_line = fields[7], fields[11], fields[12]
    red_mask, green_mask, blue_mask, colours = fields[14], fields[15], fields[16], fields[19]
    if bits_per_pixel != 32:
        raise ValueError(f"unexpected XWD bits per pixel: {bits_per_pixel} != 32")
    start = header_size + 12 * colours
    rows = np.frombuffer(data, np.uint8, bytes_per_line * height,
                         start).reshape(height, bytes_per_line)
    pixels = rows[:, :4 * width].copy().view("<u4" if byte_order == 0
                                             else ">u4").reshape(height, width)
    planes = []
    for mask in (blue_mask, green_mask, red_mask):
        shift = (mask & -mask).bit_length() - 1
        planes.append(((pixels & mask) >> shift).astype(np.uint8))
    return np.dstack(planes)


def find_window(display: VirtualDisplay, name_regex: str, *, timeout: float = 15.0) -> int:
    """The id of a visible window whose title matches ``name_regex`` (waits for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", name_regex],
                               capture_output=True, text=True, env=display.env)
        ids = found.stdout.split()
        if ids:
            return int(ids[0])
        time.sleep(0.1)
    raise AssertionError(f"no window named {name_regex!r} within {timeout} s")


def window_geometry(display: VirtualDisplay, window: int) -> tuple[int, int, int, int]:
    """(x, y, width, height) of a window on the screen."""
    shell = subprocess.run(["xdotool", "getwindowgeometry", "--shell", str(window)],
                           capture_output=True, text=True, env=display.env, check=True).stdout
    values = dict(line.split("=", 1) for line in shell.split())
    return int(values["X"]), int(values["Y"]), int(values["WIDTH"]), int(values["HEIGHT"])


def press(display: VirtualDisplay, window: int, *keys: str) -> None:
    """Focus ``window`` and type ``keys`` (xdotool key names: q, space, Escape, f, o)."""
    subprocess.run(["xdotool", "windowfocus", "--sync", str(window), "key", "--delay", "40", *keys],
                   env=display.env, check=True, timeout=10)


class _ClientMessage(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong),
                ("message_type", ctypes.c_ulong), ("format", ctypes.c_int),
                ("data", ctypes.c_long * 5)]


class _Event(ctypes.Union):
    _fields_ = [("xclient", _ClientMessage), ("pad", ctypes.c_long * 24)]


def close_window(display: VirtualDisplay, window: int) -> None:
    """Ask ``window`` to close, as a window manager's close button does (WM_DELETE_WINDOW)."""
    xlib = ctypes.CDLL(ctypes.util.find_library("X11"))
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XInternAtom.restype = ctypes.c_ulong
    xlib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    xlib.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long,
                                ctypes.POINTER(_Event)]
    xlib.XFlush.argtypes = [ctypes.c_void_p]
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    handle = xlib.XOpenDisplay(display.name.encode())
    assert handle, f"cannot open {display.name}"
    event = _Event()
    event.xclient.type = 33  # ClientMessage
    event.xclient.window = window
    event.xclient.message_type = xlib.XInternAtom(handle, b"WM_PROTOCOLS", 0)
    event.xclient.format = 32
    event.xclient.data[0] = xlib.XInternAtom(handle, b"WM_DELETE_WINDOW", 0)
    xlib.XSendEvent(handle, window, 0, 0, ctypes.byref(event))
    xlib.XFlush(handle)
    xlib.XCloseDisplay(handle)


def missing_tools() -> list[str]:
    """The programs these tests need that are not installed."""
    return [tool for tool in ("Xvfb", "xdotool") if shutil.which(tool) is None]


@pytest.fixture(scope="module")
def xserver():
    if gui_backend() == "NONE":
        pytest.skip("this OpenCV has no GUI (opencv-python-headless); the window tests need "
                    "opencv-python")
    missing = missing_tools()
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (Debian: apt-get install xvfb xdotool)")
    display = VirtualDisplay().start()
    yield display
    display.stop()


def start(display: VirtualDisplay, *args: str) -> subprocess.Popen:
    env = dict(display.env, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "streamconv", "run", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def running(display: VirtualDisplay, *args: str) -> Iterator[subprocess.Popen]:
    """``streamconv run ARGS`` on the virtual display, killed on the way out if still running."""
    process = start(display, *args)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def finish(process: subprocess.Popen, timeout: float = 15) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        raise AssertionError(f"streamconv did not exit within {timeout} s:\n{stderr}")
    return process.returncode, stderr
