"""Several SOURCEs in one run: one output per source, a tiled window, a lost camera among live
patterns, and the usage errors that keep a second name from being taken as an output."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time

import av
import cv2
import numpy as np
import pytest

import streamconv
from streamconv.errors import CameraLostError
from streamconv.io.sources.camera import WebcamSource
from streamconv.io.sinks.file import FileSink
from streamconv.io.sources.pattern import LivePattern, TestPattern
from streamconv.io.sinks.tiles import grid

from helpers.cli import REPO
from helpers.fakecam import FakeCameraFactory, FakeCapture
from helpers.xdisplay import find_window, finish, press, running, window_geometry

SIZES = [(64, 48, 30), (48, 32, 20)]  # width, height, frames of each live pattern


@functools.lru_cache(maxsize=8)
def pattern(width: int, height: int, count: int) -> list[np.ndarray]:
    """The first ``count`` (H, W, 3) uint8 RGB frames of the test pattern of that size."""
    return list(TestPattern(width, height, fps=30, frames=count))


def matches(shown: np.ndarray, frames: list[np.ndarray]) -> int:
    """The index of the pattern frame ``shown`` ((H, W, 3) RGB) is exactly, or an AssertionError."""
    for index, frame in enumerate(frames):
        if np.array_equal(frame, shown):
            return index
    raise AssertionError("not one of the pattern's frames")


def test_one_output_per_source_each_its_own_pattern_frames(cli, tmp_path):
    specs = [f"test:{w}x{h}@30,frames={n},live" for w, h, n in SIZES]
    stats_path = tmp_path / "stats.json"
    result = cli("run", *specs, "--filter", "identity", "--backend", "cpu",
                 "-o", str(tmp_path / "cam{n}_%03d.png"), "--stats-json", str(stats_path))
    assert result.returncode == 0, result.stderr
    records = json.loads(stats_path.read_text())
    assert [r["index"] for r in records] == [0, 1] and [r["source"] for r in records] == specs
    for n, (width, height, count) in enumerate(SIZES):
        files = sorted(tmp_path.glob(f"cam{n}_*.png"))
        assert records[n]["exit_code"] == 0 and records[n]["frames"] == len(files) >= count // 2
        frames = pattern(width, height, count)
        shown = [matches(cv2.imread(str(f))[..., ::-1], frames) for f in files]
        assert shown == sorted(set(shown))  # in order, none twice: the newest frame each time
        assert len(files) + records[n]["dropped"] >= count - 2
    assert re.search(r"^source 0: test:64x48", result.stderr, re.M)
    assert re.search(r"^source 1: test:48x32", result.stderr, re.M)
    total = sum(r["frames"] for r in records)
    assert f"total: {total} frames from 2 sources (2 ended without error)" in result.stderr


def test_a_camera_that_does_not_open_leaves_the_others_running(cli, tmp_path):
    result = cli("run", "test:64x48@30,frames=20,live", "webcam:63", "--filter", "identity",
                 "--backend", "cpu", "-o", str(tmp_path / "o{n}.mp4"))
    assert result.returncode == 9, result.stderr  # the camera's own exit code: the worst
    assert "error: source 1 (webcam:63): cannot open camera" in result.stderr
    assert not (tmp_path / "o1.mp4").exists()
    with av.open(str(tmp_path / "o0.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) >= 10


def test_a_lost_camera_ends_alone_and_the_run_exits_with_its_code(tmp_path):
    fast = dict(stall_timeout=0.1, backoff=0.01, max_backoff=0.02, first_frame_timeout=0.2,
                reconnect_attempts=2)
    camera = WebcamSource(0,
                          capture_factory=FakeCameraFactory(FakeCapture(list(range(13)),
                                                                        period=0.005)), **fast)
    sink = FileSink(tmp_path / "cam.mp4", width=camera.width, height=camera.height,
                    frame_rate=camera.frame_rate, time_base=camera.time_base)
    pipelines = [streamconv.Pipeline(camera, ["identity"], sink, backend="cpu"),
                 streamconv.Pipeline(LivePattern(64, 48, fps=30, frames=30), ["identity"],
                                     tmp_path / "live.mp4", backend="cpu")]
    result = streamconv.MultiRun(pipelines, ["camera", "pattern"]).run()
    lost, live = result.results
    assert isinstance(lost.error, CameraLostError) and lost.exit_code == 10 and \
        result.exit_code == 10
    assert live.error is None and live.exit_code == 0 and live.stats.frames + \
        live.stats.dropped >= 28
    assert live.stats.wall_seconds > 0.8  # it kept going long after the camera was lost
    for name, stats in (("cam.mp4", lost.stats), ("live.mp4", live.stats)):
        with av.open(str(tmp_path / name)) as container:
            # a camera drops, never queues
            assert sum(1 for _ in container.decode(video=0)) == stats.frames >= 1


def test_run_many_refuses_one_output_for_several_sources(tmp_path):
    with pytest.raises(streamconv.OutputError, match=r"put \{n\} in its name"):
        streamconv.run_many(["test:64x48,frames=2,live"] * 2, ["identity"], tmp_path / "one.mp4",
                            backend="cpu")
    assert not (tmp_path / "one.mp4").exists()


@pytest.mark.parametrize("args, message", [
    (["a.mp4", "b.mp4"],
     "one SOURCE only, got 'a.mp4' and 'b.mp4'; name the output with -o OUTPUT"),
    (["a.mp4", "b.mp4", "-y"], "one SOURCE only"),
    # not live: could be a file's name
    (["test:64x48,frames=5", "test:64x48,live"], "one SOURCE only"),
    (["webcam:0", "webcam:1", "-o", "x.mp4"], "2 SOURCEs into one -o 'x.mp4': put {n} in its name"),
    (["webcam:0", "webcam:1", "--side-by-side"], "--side-by-side shows one SOURCE"),
    (["webcam:0", "webcam:1", "--progress", "p.txt"], "--progress reports one SOURCE's run"),
    (["webcam:0", "a.mp4", "-o", "o{n}.mp4", "--size", "64x48"], "not to 'a.mp4'"),
])
def test_unsafe_or_unclear_several_sources_are_usage_errors(cli, tmp_path, args, message):
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"not touched")
    result = cli("run", *args, "--backend", "cpu", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "usage: streamconv run" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]
    assert all((tmp_path / name).read_bytes() == b"not touched" for name in ("a.mp4", "b.mp4"))


def test_an_output_that_would_be_one_of_the_sources_is_refused(cli, tmp_path):
    (tmp_path / "o0.mp4").write_bytes(b"an input")
    result = cli("run", "o0.mp4", "test:64x48,frames=5,live", "-o", "o{n}.mp4", "-y", "--backend",
                 "cpu", cwd=tmp_path)
    assert result.returncode == 6 and \
        "output is the same file as the input: o0.mp4" in result.stderr
    assert (tmp_path / "o0.mp4").read_bytes() == b"an input" and not (tmp_path / "o1.mp4").exists()


def test_grid_is_as_square_as_can_be():
    assert [grid(n) for n in (1, 2, 3, 4, 5, 9, 10)] == [(1, 1), (1, 2), (2, 2), (2, 2), (2, 3),
                                                         (3, 3), (3, 4)]


TILES = [(160, 120), (96, 72), (128, 96)]  # three sources: a 2x2 grid of 160x120 cells


def test_window_tiles_every_source_and_q_stops_them_all(xserver,
                                                        tmp_path):  # noqa: F811 - the fixture
    specs = [f"test:{w}x{h}@30,live" for w, h in TILES]
    with running(xserver, *specs, "--display", "--no-overlay", "--filter", "identity",
                 "--backend", "cpu", "-o", str(tmp_path / "t{n}.mkv")) as process:
        window = find_window(xserver, "^streamconv: 3 sources")
        time.sleep(1.0)
        x, y, width, height = window_geometry(xserver, window)
        pixels = _settled_tiles(xserver, (x, y, width, height))
        press(xserver, window, "q")
        code, stderr = finish(process)
    assert code == 0, stderr
    assert (height, width) == (2 * 120, 2 * 160)
    for n, (w, h) in enumerate(TILES):
        row, column = divmod(n, 2)
        cell = pixels[row * 120:(row + 1) * 120, column * 160:(column + 1) * 160]
        matches(cell[:h, :w, ::-1], pattern(w, h, 600))
        # the rest of a smaller source's cell is black
        assert not cell[h:].any() and not cell[:, w:].any()
    assert not pixels[120:, 160:].any()  # the fourth cell has no source
    for n in range(3):
        assert re.search(rf"^source {n}: test:", stderr, re.M)
        assert (tmp_path / f"t{n}.mkv").stat().st_size > 0
    assert "(interrupted)" in stderr


def _settled_tiles(display, geometry, timeout: float = 8.0) -> np.ndarray:
    """The window once each tile shows a whole pattern frame (a loaded machine paints late)."""
    x, y, width, height = geometry
    deadline = time.monotonic() + timeout
    while True:
        pixels = display.stable_screen()[y:y + height, x:x + width]
        try:
            for n, (w, h) in enumerate(TILES):
                row, column = divmod(n, 2)
                matches(pixels[row * 120:row * 120 + h, column * 160:column * 160 + w, ::-1],
                        pattern(w, h, 600))
            return pixels
        except AssertionError:
            if time.monotonic() > deadline:
                return pixels
            time.sleep(0.1)


def test_ctrl_c_stops_every_source_and_finishes_each_output(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "streamconv", "run", "test:64x48@30,live",
                                "test:48x32@30,live", "--filter", "identity", "--backend", "cpu",
                                "-o", str(tmp_path / "c{n}.mp4"),
                                "--stats-json", str(tmp_path / "s.json")],
                               env={**os.environ, "PYTHONPATH": str(REPO)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # imports, then about a second of frames
    process.send_signal(signal.SIGINT)
    code, stderr = finish(process)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    records = json.loads((tmp_path / "s.json").read_text())
    for n, record in enumerate(records):
        assert record["interrupted"] and record["exit_code"] == 130
        with av.open(str(tmp_path / f"c{n}.mp4")) as container:
            assert sum(1 for _ in container.decode(video=0)) == record["frames"] > 5


@pytest.mark.parametrize("output, message", [
    ("d{n}/../out.mp4", "output is the same file as the output of source 1: d0/../out.mp4"),
    # f%d1.png's 11th is f%d11.png's 1st
    ("f%d{n}.png", "names some of the files of the output of source"),
])
def test_outputs_of_several_sources_that_name_one_file_are_refused_before_any_work(
        cli, tmp_path, output, message):
    for folder in ("d0", "d1"):
        (tmp_path / folder).mkdir()
    sources = [f"test:32x24,frames={frames}" for frames in range(5, 17)]
    result = cli("run", *sources, "-o", output, "--overwrite", "--backend", "cpu", "-q",
                 "--no-progress", cwd=tmp_path)
    assert result.returncode == 6 and message in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d0", "d1"]


def test_tiles_are_the_size_the_chain_gives_each_source(xserver):  # noqa: F811
    """A chain that halves the frames: each cell is the output's size, not the input's (which
    left a window four times too large, each tile in a corner of black)."""
    from streamconv.backends.cpu.backend import CpuBackend
    from streamconv.chain.filters import parse_chain

    sizes = [(320, 240), (192, 144)]
    scale = CpuBackend(parse_chain(["scale:w=160,h=-1"]))
    shrunk = [[scale.apply(frame) for frame in pattern(w, h, 600)] for w, h in sizes]
    with running(xserver, *(f"test:{w}x{h}@30,live" for w, h in sizes), "--display",
                 "--no-overlay", "--filter", "scale:w=160,h=-1", "--backend", "cpu") as process:
        window = find_window(xserver, "^streamconv: 2 sources")
        deadline = time.monotonic() + 8.0
        while True:
            x, y, width, height = window_geometry(xserver, window)
            pixels = xserver.stable_screen()[y:y + height, x:x + width]
            try:
                for n in range(2):
                    matches(pixels[:120, n * 160:(n + 1) * 160, ::-1], shrunk[n])
                break
            except AssertionError:
                assert time.monotonic() < deadline, "a tile shows none of its source's outputs"
                time.sleep(0.1)
        press(xserver, window, "q")
        code, stderr = finish(process)
    assert code == 0, stderr
    assert (height, width) == (120, 2 * 160)
