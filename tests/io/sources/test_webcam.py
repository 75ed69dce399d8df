"""WebcamSource driven by a fake capture device: conversion, stamps, drops, reconnects, giving
up."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import av
import numpy as np
import pytest

import streamconv
from streamconv.errors import CameraError, CameraLostError, InputError
from streamconv.io.sources.camera import WebcamSource, parse_webcam_spec
from streamconv.io.spec import is_webcam_spec
from streamconv.io.sinks.file import FileSink
from streamconv.io.sinks.sink import CallbackSink

from helpers.cli import REPO
from helpers.fakecam import (FAIL, FakeCameraFactory, FakeCapture, REPEAT, SHAPE, count_from,
                             number_of)

FAST = dict(stall_timeout=0.1, backoff=0.01, max_backoff=0.02, first_frame_timeout=0.2)


def webcam(*captures, **options) -> tuple[WebcamSource, FakeCameraFactory]:
    factory = FakeCameraFactory(*captures)
    return WebcamSource(0, capture_factory=factory, **{**FAST, **options}), factory


def take(source: WebcamSource, count: int, *, timeout: float = 5.0) -> list[tuple[int, object]]:
    """Read ``count`` frames: [(frame number, meta)]."""
    buffer = np.empty(source.shape, np.uint8)
    got = []
    deadline = time.perf_counter() + timeout
    while len(got) < count:
        assert time.perf_counter() < deadline, f"only {len(got)} of {count} frames in {timeout} s"
        meta = source.read_into(buffer)
        assert meta is not None, f"stream ended after {len(got)} frames"
        got.append((number_of(buffer), meta))
    return got


def test_frames_are_rgb_numbered_and_stamped_at_capture():
    source, factory = webcam(FakeCapture(count_from(0), period=0.01), fps=25, width=32, height=24)
    with source:
        assert source.shape == SHAPE and source.is_live and source.frame_count is None
        assert float(source.frame_rate) == 25 and "FAKE" in source.describe()
        frames = take(source, 5)
    numbers = [n for n, _ in frames]
    assert numbers == sorted(numbers) and len(set(numbers)) == 5
    metas = [meta for _, meta in frames]
    assert [m.index for m in metas] == list(range(5))
    assert metas[0].pts == 0 and all(b.pts > a.pts for a, b in zip(metas, metas[1:]))
    assert all(b.captured > a.captured for a, b in zip(metas, metas[1:]))
    assert factory.made[0].props == {3: 32, 4: 24, 5: 25}  # width, height, fps requested
    assert factory.made[0].released.is_set()


def test_newest_frame_policy_drops_stale_frames_and_counts_them():
    period = 0.004
    source, _ = webcam(FakeCapture(count_from(0), period=period))
    buffer = np.empty(source.shape, np.uint8)
    with source:
        numbers, ages = [], []
        for _ in range(6):
            time.sleep(0.04)  # a slow pipeline: about ten frames arrive meanwhile
            meta = source.read_into(buffer)
            ages.append(time.perf_counter() - meta.captured)
            numbers.append(number_of(buffer))
        dropped = source.dropped
    skipped = numbers[-1] - numbers[0] - (len(numbers) - 1)
    assert skipped >= 5 * 3, numbers  # frames came faster than they were taken
    assert dropped >= skipped
    # Never queued: what is taken is the newest frame, not one from the backlog.
    assert max(ages) < 0.03, ages


def test_reconnects_after_reads_fail():
    first = FakeCapture([0, 1, 2, FAIL, FAIL, FAIL], period=0.005)
    second = FakeCapture(count_from(100), period=0.005)
    source, factory = webcam(first, second)
    with source:
        numbers = []
        while not numbers or numbers[-1] < 100:
            numbers += [n for n, _ in take(source, 1)]
        assert source.reconnects == 1
    assert numbers[0] in (1, 2) and numbers[-1] >= 100
    assert factory.calls == [0, 0] and first.released.is_set() and second.released.is_set()


def test_reconnects_when_the_same_frame_repeats_and_does_not_deliver_repeats():
    first = FakeCapture([0, 1] + [REPEAT] * 50, period=0.002)
    second = FakeCapture(count_from(100), period=0.005)
    source, factory = webcam(first, second, repeat_limit=5)
    with source:
        numbers = [n for n, _ in take(source, 1)]
        while numbers[-1] < 100:
            numbers += [n for n, _ in take(source, 1)]
    assert numbers[0] == 1 and numbers.count(1) == 1
    assert source.reconnects == 1 and len(factory.calls) == 2


def test_gives_up_after_the_last_attempt_with_its_own_exit_code():
    source, factory = webcam(FakeCapture([0, 1, 2], period=0.005), reconnect_attempts=3)
    buffer = np.empty(source.shape, np.uint8)
    started = time.perf_counter()
    with source:
        with pytest.raises(CameraLostError) as caught:
            for _ in range(10):
                source.read_into(buffer)
    assert "reopened 3 times" in str(caught.value) and "giving up" in str(caught.value)
    assert caught.value.exit_code == 10 and isinstance(caught.value, streamconv.StreamError)
    assert len(factory.calls) == 1 + 3
    assert time.perf_counter() - started < 3


def test_a_read_that_never_returns_is_reported():
    source, _ = webcam(FakeCapture([0, 1, ("hang", 0.8)], period=0.005))
    source.hang_timeout = 0.3
    buffer = np.empty(source.shape, np.uint8)
    with pytest.raises(CameraLostError, match="a read has not returned"):
        with source:
            for _ in range(5):
                source.read_into(buffer)


def test_a_camera_that_does_not_open_says_what_was_tried():
    factory = FakeCameraFactory()  # every capture it makes stays closed
    with pytest.raises(CameraError) as caught:
        WebcamSource(3, capture_factory=factory)
    message = str(caught.value)
    assert "cannot open camera webcam:3" in message and \
        "FakeCameraFactory(3) did not open" in message
    assert caught.value.exit_code == 9 and isinstance(caught.value, InputError)
    assert factory.made[0].released.is_set()


def test_a_camera_that_opens_but_gives_no_frame_is_refused():
    factory = FakeCameraFactory(FakeCapture([FAIL] * 1000))
    with pytest.raises(CameraError, match=r"opened but gave no frame in 0\.1 s"):
        WebcamSource("/dev/video9", capture_factory=factory, first_frame_timeout=0.1)
    assert factory.made[0].released.is_set()


def test_close_is_idempotent_and_stops_a_waiting_read():
    source, factory = webcam(FakeCapture([0, 1] + [FAIL] * 10_000, period=0.01), stall_timeout=60)
    buffer = np.empty(source.shape, np.uint8)
    source.read_into(buffer)
    source.interrupt()
    assert source.read_into(buffer) is None
    source.close()
    source.close()
    assert factory.made[0].released.is_set()


@pytest.mark.parametrize("spec, device",
                         [("webcam", 0), ("webcam:2", 2), ("/dev/video3", "/dev/video3"),
                                          ("webcam:/dev/video1", "/dev/video1")])
def test_specs(spec, device):
    assert is_webcam_spec(spec) and parse_webcam_spec(spec) == device


@pytest.mark.parametrize("spec", ["webcam:x", "webcam:", "webcam:video0"])
def test_bad_specs(spec):
    with pytest.raises(InputError, match="expected webcam, webcam:N or /dev/videoN"):
        parse_webcam_spec(spec)
    assert not is_webcam_spec("webcams") and not is_webcam_spec("/dev/video")


def test_pipeline_latency_counts_from_capture_and_a_slow_sink_causes_drops_not_delay():
    source, _ = webcam(FakeCapture(count_from(0), period=0.005))
    numbers = []

    def slow(frame, meta):
        numbers.append(number_of(frame))
        time.sleep(0.03)

    stats = streamconv.Pipeline(source, ["identity"], CallbackSink(slow), backend="cpu",
                                max_frames=8).run()
    assert stats.frames == 8 and stats.dropped > 8
    assert numbers == sorted(numbers) and numbers[-1] - numbers[0] > 20
    # Bounded by the ring (3 frames of 30 ms), not by how long the run lasted.
    assert stats.summary()["latency"]["max"] < 3 * 30 + 60
    assert stats.to_dict()["dropped"] == stats.dropped


def test_camera_lost_mid_run_finalizes_the_recording(tmp_path):
    source, _ = webcam(FakeCapture(list(range(13)), period=0.005), reconnect_attempts=2)
    out = tmp_path / "cam.mp4"
    sink = FileSink(out, width=source.width, height=source.height, frame_rate=source.frame_rate,
                    time_base=source.time_base)
    pipeline = streamconv.Pipeline(source, ["box:size=3"], sink, backend="cpu")
    with pytest.raises(CameraLostError):
        pipeline.run()
    # how many of the 13 the run takes depends on the machine's load (a live source keeps only
    # the newest frame); what is taken is in the file, complete
    stats = pipeline.stats
    assert stats.frames >= 1 and stats.frames + stats.dropped <= 13, stats
    with av.open(str(out)) as container:
        decoded = list(container.decode(video=0))
    assert len(decoded) == pipeline.stats.frames
    assert decoded[0].width == SHAPE[1] and decoded[0].height == SHAPE[0]


def test_cli_reports_a_camera_that_is_not_there(cli):
    result = cli("run", "webcam:63", "--filter", "edge", "--size", "640x480", "--fps", "30")
    assert result.returncode == 9, result.stderr
    assert "streamconv: error: cannot open camera webcam:63" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_refuses_camera_options_for_files(cli):
    result = cli("run", "test:64x48,frames=2", "--size", "640x480")
    assert result.returncode == 2 and "--size and --fps apply to cameras" in result.stderr


def test_webcam_example_names_a_missing_camera(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "examples" / "webcam_edge.py"), "--camera",
                             "63"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 9 and "cannot open camera webcam:63" in result.stderr
