"""Live sources, real-time pacing, swapping filters mid-run, fan-out sinks and the status line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.errors import FilterSpecError, StreamError
from streamconv.chain.filters import parse_chain
from streamconv.io.sources.arrays import ArraySource
from streamconv.io.sources.live import RealtimeSource
from streamconv.io.open import open_source
from streamconv.io.sources.pattern import LivePattern, TestPattern
from streamconv.io.sinks.sink import CallbackSink, FanoutSink, Sink
from streamconv.run.progress import StatusLine
from streamconv.run.stats import RunStats

from helpers.cli import REPO


def test_live_pattern_runs_on_its_clock_and_stamps_frames():
    with LivePattern(64, 48, fps=100, frames=None) as source:
        buffer = np.empty(source.shape, np.uint8)
        metas = [source.read_into(buffer) for _ in range(10)]
    gaps = np.diff([m.captured for m in metas])
    assert np.median(gaps) == pytest.approx(0.01, abs=0.004)
    assert [m.index for m in metas] == list(range(10)) and metas[0].pts == 0
    assert metas[-1].pts == pytest.approx(90, abs=25)  # milliseconds


def test_a_waiting_reader_gets_frames_captured_straight_into_its_buffer():
    """The reader's buffer is lent to the producer while it waits: no copy, the same pictures."""
    with LivePattern(64, 48, fps=50, frames=None) as source:
        buffers = [np.full(source.shape, 7, np.uint8) for _ in range(3)]  # a ring of slots
        delivered = []
        for number in range(9):
            buffer = buffers[number % 3]
            meta = source.read_into(buffer)
            delivered.append((meta.index, buffer.copy()))
        in_place, dropped = source.in_place, source.dropped
    # the first frames may be copied: they came before any wait
    assert in_place >= 7 and dropped == 0
    with TestPattern(64, 48, fps=50) as pattern:
        expected = [frame for _, frame in zip(range(9), pattern)]
    for index, frame in delivered:
        # frame k of the clock is pattern frame k
        np.testing.assert_array_equal(frame, expected[index])


class _SlowCapture(LivePattern):
    """A live source whose capture into the lent buffer takes ``hold`` seconds (a slow sensor
    read)."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.capturing = threading.Event()
        super().__init__(16, 16, fps=1000)

    def _produce(self) -> None:
        while not self.stopping:
            target = self._capture_buffer()
            if target is self._back:  # nobody waiting yet
                self._sleep(0.001)
                continue
            self.capturing.set()
            self._sleep(self.hold)
            target.fill(200)
            self._publish(time.perf_counter(), target)
            return


def test_an_interrupted_reader_waits_for_the_capture_into_its_buffer_to_finish():
    source = _SlowCapture(hold=0.3)
    buffer = np.zeros(source.shape, np.uint8)
    result = []
    reader = threading.Thread(target=lambda: result.append(source.read_into(buffer)))
    reader.start()
    assert source.capturing.wait(2)
    source.interrupt()  # while the producer still writes into buffer
    reader.join(0.1)
    assert reader.is_alive()  # the buffer is not handed back half written
    reader.join(2)
    assert not reader.is_alive() and result == [None] and (buffer == 200).all()
    source.close()


def test_live_pattern_ends_after_its_frames_and_spec_parses():
    source = open_source("test:32x24@200,frames=5,live")
    assert isinstance(source, LivePattern) and source.is_live and source.shape == (24, 32, 3)
    with source:
        assert 1 <= len(list(source)) <= 5  # frames due before the first read are not queued
    with pytest.raises(streamconv.InputError, match=r"\[,live\]"):
        open_source("test:32x24,live,frames=3")


def test_realtime_source_paces_at_the_frame_rate():
    source = RealtimeSource(TestPattern(16, 16, fps=50, frames=10))
    buffer = np.empty(source.shape, np.uint8)
    started = time.perf_counter()
    metas = [source.read_into(buffer) for _ in range(10)]
    assert time.perf_counter() - started == pytest.approx(9 / 50, abs=0.05)
    assert source.read_into(buffer) is None
    assert all(m.captured is not None for m in metas) and not source.is_live
    assert source.describe().endswith("(real time)") and source.frame_count == 10


def test_stop_interrupts_a_live_source_waiting_for_its_next_frame():
    pipeline = streamconv.Pipeline(LivePattern(16, 16, fps=0.5), [], None, backend="cpu")
    threading.Timer(0.3, pipeline.stop).start()
    started = time.perf_counter()
    stats = pipeline.run()
    assert time.perf_counter() - started < 1.5 and stats.interrupted


def test_set_filters_mid_run_swaps_between_frames_and_loses_none(rng):
    frames = [rng.integers(0, 256, (20, 24, 3), dtype=np.uint8) for _ in range(30)]
    chain_a, chain_b = parse_chain(["box:size=3"]), parse_chain(["edge"])
    got = []
    pipeline = None

    def collect(frame, meta):
        got.append((meta.index, frame.copy()))
        if meta.index == 5:
            pipeline.set_filters(["edge"], label="edges")

    pipeline = streamconv.Pipeline(ArraySource(frames), chain_a, CallbackSink(collect),
                                   backend="cpu")
    stats = pipeline.run()
    assert [i for i, _ in got] == list(range(30)) and stats.frames == 30 and stats.dropped == 0
    switched = [np.array_equal(out, CpuBackend(chain_b).apply(frames[i])) for i, out in got]
    first_b = switched.index(True)
    assert 5 < first_b <= 5 + 3 and all(switched[first_b:])  # at most the ring's frames late
    for i, out in got[:first_b]:
        np.testing.assert_array_equal(out, CpuBackend(chain_a).apply(frames[i]))
    assert pipeline.filter_label == "edges"


def test_set_filters_checks_specs_in_the_caller():
    pipeline = streamconv.Pipeline(TestPattern(8, 8, frames=1), [], None, backend="cpu")
    with pytest.raises(FilterSpecError):
        pipeline.set_filters(["nope"])
    pipeline.set_filters(["identity"], label="before the run")
    pipeline.run()
    assert pipeline.filter_label == "before the run"


class _EagerLive(ArraySource):
    """Frames always ready at once, from a source that calls itself live."""

    is_live = True


def test_a_live_source_ahead_of_compute_skips_stale_slots(rng):
    frames = [rng.integers(0, 256, (96, 96, 3), dtype=np.uint8) for _ in range(40)]
    indices = []
    pipeline = streamconv.Pipeline(_EagerLive(frames), ["box:size=31"],
                                   CallbackSink(lambda f, m: indices.append(m.index)),
                                   backend="cpu")
    stats = pipeline.run()
    assert stats.dropped > 0 and stats.frames + stats.dropped == 40
    assert indices == sorted(indices) and indices[-1] == 39


class _Recording(Sink):
    def __init__(self, fail_on_close=False):
        self.seen, self.inputs, self.closed, self.aborted = [], [], False, False
        self.fail_on_close = fail_on_close

    def send(self, frame, meta):
        self.seen.append(meta.index)

    def send_with_input(self, frame, source_frame, meta):
        self.inputs.append(source_frame.copy())
        self.send(frame, meta)

    def close(self):
        self.closed = True
        if self.fail_on_close:
            raise StreamError("disk full")

    def abort(self):
        self.aborted = True


def test_fanout_sends_everywhere_with_the_input_and_closes_all(rng):
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(4)]
    plain = []
    first, second = _Recording(fail_on_close=True), _Recording()
    sink = FanoutSink([first, CallbackSink(lambda f, m: plain.append(m.index)), second])
    with pytest.raises(StreamError, match="disk full"):
        streamconv.Pipeline(ArraySource(frames), ["box:size=3"], sink, backend="cpu").run()
    assert first.seen == second.seen == plain == [0, 1, 2, 3]
    assert first.closed and second.closed
    for given, original in zip(second.inputs, frames):
        np.testing.assert_array_equal(given, original)  # the unfiltered input travels beside it


def test_status_line_shows_fps_drops_and_recent_percentiles():
    stats = RunStats()
    stream = io.StringIO()
    line = StatusLine(stats, stream=stream, enabled=True, interval=0.0)
    for ms in (1.0, 2.0, 3.0, 4.0):
        stats.record({"read": ms / 1e3, "kernel": 2e-3, "latency": 10 * ms / 1e3})
    stats.dropped = 3
    line.update(stats.frames)
    text = stream.getvalue()
    assert text.startswith("\r") and "4 frames" in text and "3 dropped" in text
    assert "read 2.5/3.8" in text and "latency 25.0/38.5 ms p50/p95" in text
    line.close()
    assert stream.getvalue().endswith("\n")
    assert StatusLine(stats, stream=io.StringIO()).enabled is False  # not a terminal


def test_max_frames_counts_frames_filtered_not_stale_ones_skipped(rng):
    frames = [rng.integers(0, 256, (96, 96, 3), dtype=np.uint8) for _ in range(80)]
    stats = streamconv.Pipeline(_EagerLive(frames), ["box:size=31"], None, backend="cpu",
                                max_frames=20).run()
    assert stats.frames == 20 and stats.dropped > 0


def test_live_benchmark_runs_on_the_cpu(tmp_path):
    out = tmp_path / "live.json"
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "live.py"), "--backend",
                             "cpu",
                             "--size", "64x48", "--fps", "100", "--frames", "20", "--warmup", "5",
                             "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["frames"] == 20 and data["max_lsb_vs_cpu"] == 0
    assert set(data["stages_ms"]) >= {"read", "kernel", "write", "latency"}
    assert "target latency p99 <= 2 ms" in result.stdout.splitlines()[-1]
