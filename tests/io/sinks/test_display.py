"""The display window under a virtual X server: what it shows, its keys, closing it, no display.

Each run is ``streamconv run ... --display`` in a subprocess, as a user runs it; the test
reads the screen, compares the window's pixels with the frames the CPU reference makes,
and drives the window with real key presses.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import av
import cv2
import numpy as np
import pytest

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.io.sinks.display import gui_backend
from streamconv.io.sinks.overlay import overlay_box
from streamconv.errors import DisplayError
from streamconv.chain.filters import parse_chain
from streamconv.chain.presets import load_preset
from streamconv.io.sources.pattern import TestPattern

from helpers.cli import REPO
from helpers.xdisplay import (VirtualDisplay, close_window, find_window, finish, press, running,
                              window_geometry)

WIDTH, HEIGHT = 320, 240

needs_gui = pytest.mark.skipif(
    gui_backend() == "NONE",
    reason="this OpenCV has no GUI (opencv-python-headless); the window tests need opencv-python")


def window_pixels(display: VirtualDisplay, window: int) -> np.ndarray:
    x, y, width, height = window_geometry(display, window)
    return display.stable_screen()[y:y + height, x:x + width]


def pattern_frames(count: int) -> list[np.ndarray]:
    """The first ``count`` RGB frames of the test source used below."""
    return list(TestPattern(WIDTH, HEIGHT, fps=30, frames=count))


def match_frame(panel_bgr: np.ndarray, frames: list[np.ndarray], *, skip_overlay: bool) -> int:
    """Which input frame a window panel shows, comparing outside the overlay region if asked."""
    mask = np.ones(panel_bgr.shape[:2], bool)
    if skip_overlay:
        x, y, width, height = overlay_box(WIDTH)
        mask[y:y + height, x:x + width] = False
    shown = panel_bgr[..., ::-1][mask]
    for index, frame in enumerate(frames):
        if np.array_equal(frame[mask], shown):
            return index
    raise AssertionError("the window shows none of the source's frames")


def settled_pixels(display: VirtualDisplay, window: int, frames: list[np.ndarray], *,
                   timeout: float = 15.0, skip_overlay: bool = False):
    """The window once it shows a whole source frame on the left, outside the overlay if asked
    (the first frame, and a key press's effect, reach the window later on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        pixels = window_pixels(display, window)
        try:
            match_frame(pixels[:, :WIDTH], frames, skip_overlay=skip_overlay)
            return pixels
        except AssertionError:
            if time.monotonic() > deadline:
                return pixels  # the caller's own check reports what it shows
            time.sleep(0.1)


def test_window_shows_input_and_output_and_keys_drive_it(xserver, tmp_path):
    frames = pattern_frames(1200)
    out, stats_path = tmp_path / "watched.mp4", tmp_path / "stats.json"
    with running(xserver, f"test:{WIDTH}x{HEIGHT}@30,frames=100000", "--realtime", "--side-by-side",
                 "--filter", "edge", "--backend", "cpu", "-o", str(out), "--stats-json",
                 str(stats_path), "-v") as process:
        window = find_window(xserver, "^streamconv: test")
        time.sleep(0.5)  # a few frames in, so the overlay has numbers
        with_overlay = settled_pixels(xserver, window, frames, skip_overlay=True)
        press(xserver, window, "o")
        time.sleep(0.3)
        press(xserver, window, "space")
        time.sleep(0.4)
        paused = settled_pixels(xserver, window, frames)
        time.sleep(0.3)
        still_paused = window_pixels(xserver, window)
        press(xserver, window, "space", "f")
        time.sleep(1.0)  # the ring drains and the new chain takes over
        press(xserver, window, "space")
        time.sleep(0.4)
        switched = settled_pixels(xserver, window, frames)
        press(xserver, window, "q")
        code, stderr = finish(process)
    assert code == 0, stderr
    assert with_overlay.shape == (HEIGHT, 2 * WIDTH, 3)

    edge = CpuBackend(parse_chain(["edge"]))
    # Running, overlay on: the left panel is the input outside the overlay, the right the filtered
    # frame.
    k = match_frame(with_overlay[:, :WIDTH], frames, skip_overlay=True)
    np.testing.assert_array_equal(with_overlay[:, WIDTH:, ::-1], edge.apply(frames[k]))
    x, y, width, height = overlay_box(WIDTH)
    box = (slice(y, y + height), slice(x, x + width))
    assert not np.array_equal(with_overlay[box][..., ::-1], frames[k][box])

    # Overlay off, paused: the whole window is exactly input | output, and it holds still.
    k = match_frame(paused[:, :WIDTH], frames, skip_overlay=False)
    np.testing.assert_array_equal(paused[:, WIDTH:, ::-1], edge.apply(frames[k]))
    np.testing.assert_array_equal(paused, still_paused)

    # f switched the chain without a restart; the log names the new one.
    label = re.search(r"filters now: (\S+)", stderr)
    assert label, stderr
    k = match_frame(switched[:, :WIDTH], frames, skip_overlay=False)
    expected = CpuBackend(list(load_preset(label[1]).filters)).apply(frames[k])
    np.testing.assert_array_equal(switched[:, WIDTH:, ::-1], expected)

    # Recorded while watching: the file holds every frame the run counted.
    stats = json.loads(stats_path.read_text())
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == stats["frames"] > 10
    assert stats["interrupted"] and stats["stages_ms"]["latency"]["p50"] > 0


@pytest.mark.parametrize("how, code", [("close the window", 0), ("Ctrl-C", 130)])
def test_closing_the_window_or_ctrl_c_stops_and_finalizes(xserver, tmp_path, how, code):
    out = tmp_path / "live.mp4"
    with running(xserver, "test:160x120@30,live", "--display", "--filter", "box:size=3",
                 "--backend", "cpu", "-o", str(out)) as process:
        window = find_window(xserver, "^streamconv: test")
        time.sleep(0.6)
        if how == "Ctrl-C":
            process.send_signal(signal.SIGINT)
        else:
            close_window(xserver, window)
        returncode, stderr = finish(process)
    assert returncode == code, stderr
    assert "Traceback" not in stderr
    frames = int(re.search(r"(\d+) frames in", stderr)[1])
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == frames > 5


def _free_display_number() -> int:
    from pathlib import Path

    return next(n for n in range(400, 500) if not Path(f"/tmp/.X{n}-lock").exists()
                and not Path(f"/tmp/.X11-unix/X{n}").exists())


@needs_gui
@pytest.mark.parametrize("display, message", [
    (None, "neither DISPLAY nor WAYLAND_DISPLAY is set"),
    ("unused", "cannot connect to the X display"),
])
def test_no_display_is_a_clear_error(cli, tmp_path, display, message):
    env = {"DISPLAY": "", "WAYLAND_DISPLAY": ""}
    if display == "unused":
        env["DISPLAY"] = f":{_free_display_number()}"
    out = tmp_path / "never.mp4"
    result = cli("run", "test:64x48,frames=3", "--display", "-o", str(out), env=env)
    assert result.returncode == DisplayError.exit_code == 11, result.stderr
    assert f"streamconv: error: {message}" in result.stderr or message in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_an_opencv_without_gui_is_named(monkeypatch):
    import streamconv.io.sinks.display as display

    monkeypatch.setattr(display, "gui_backend", lambda: "NONE")
    with pytest.raises(DisplayError, match="no GUI support.*install opencv-python"):
        display.check_display()


def test_importing_av_before_opencv_is_refused_rather_than_hanging():
    code = ("import av, cv2\nfrom streamconv.io.sinks.display import check_import_order\n"
            "try:\n    check_import_order('QT5')\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    if not sys.platform.startswith("linux"):
        pytest.skip("the check applies to Linux only")
    assert result.stdout.startswith("DisplayError PyAV was imported before OpenCV"), result.stderr


def test_side_by_side_shows_the_input_at_the_size_a_scale_stage_gives(xserver):
    """A chain that halves the frame: the window is two half-size panels, the input shrunk beside
    the output."""
    frames = pattern_frames(1200)
    half = (WIDTH // 2, HEIGHT // 2)
    shrunk = [cv2.resize(frame, half, interpolation=cv2.INTER_AREA) for frame in frames]
    with running(xserver, f"test:{WIDTH}x{HEIGHT}@30,frames=100000", "--realtime", "--side-by-side",
                 "--no-overlay", "--filter", f"scale:w={WIDTH // 2},h=-1", "--backend", "cpu"
                 ) as process:
        window = find_window(xserver, "^streamconv: test")
        deadline, shown = time.monotonic() + 5.0, None
        while shown is None:
            pixels = window_pixels(xserver, window)
            left = pixels[:, :WIDTH // 2, ::-1]
            shown = next((k for k, frame in enumerate(shrunk) if np.array_equal(frame, left)), None)
            assert shown is not None or time.monotonic() < deadline, "the left panel shows no input"
            time.sleep(0.1)
        press(xserver, window, "q")
        code, stderr = finish(process)
    assert code == 0, stderr
    assert pixels.shape == (HEIGHT // 2, WIDTH, 3)
    scale = CpuBackend(parse_chain([f"scale:w={WIDTH // 2},h=-1"]))
    np.testing.assert_array_equal(pixels[:, WIDTH // 2:, ::-1], scale.apply(frames[shown]))


def test_an_overlay_line_longer_than_its_box_stays_in_the_box(rng):
    """A status line wider than the input's panel (latencies of three digits under load) is cut
    at the box's edge: the output panel beside it keeps every pixel."""
    from streamconv.io.sinks.overlay import draw_overlay, overlay_box

    canvas = rng.integers(0, 256, (120, 2 * 160, 3), dtype=np.uint8)
    before = canvas.copy()
    left, top, width, height = overlay_box(160)
    draw_overlay(canvas, ["W" * 200, "latency p50 123.456 ms p99 987.654 ms"], left, top, width,
                 height)
    np.testing.assert_array_equal(canvas[:, 160:], before[:, 160:])
    assert (canvas[top:top + height, left:left + width] != before[:height, :width]).any()


def test_side_by_side_with_a_temporal_chain_shows_each_output_beside_its_own_input(xserver):
    """tmean over 5 frames puts out frame i two frames after reading it: the left panel is still
    frame i, the one the right panel's output belongs to, not the frame read last."""
    from streamconv.backends import create_backend

    from helpers.temporal import drive

    frames = pattern_frames(1200)
    with create_backend("cpu", parse_chain(["tmean:frames=5"])) as backend:
        expected = drive(backend, np.stack(frames[:400]), 3)
    with running(xserver, f"test:{WIDTH}x{HEIGHT}@30,frames=100000", "--realtime", "--side-by-side",
                 "--no-overlay", "--filter", "tmean:frames=5", "--backend", "cpu") as process:
        window = find_window(xserver, "^streamconv: test")
        deadline = time.monotonic() + 10.0
        while window_pixels(xserver, window).shape != (HEIGHT, 2 * WIDTH, 3):
            assert time.monotonic() < deadline, "the window never took its size"
            time.sleep(0.1)
        press(xserver, window, "space")  # paused: one pair stays on screen
        time.sleep(0.4)
        pixels = settled_pixels(xserver, window, frames)
        press(xserver, window, "q")
        code, stderr = finish(process)
    assert code == 0, stderr
    k = match_frame(pixels[:, :WIDTH], frames, skip_overlay=False)
    assert k < len(expected), "the run went further than the frames worked out here"
    np.testing.assert_array_equal(pixels[:, WIDTH:, ::-1], expected[k])
