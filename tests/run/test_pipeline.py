"""The slot pipeline on the CPU backend: order, ring depths, stats, errors and stopping."""

from __future__ import annotations

import json
import threading

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.errors import StreamError
from streamconv.chain.filters import parse_filter
from streamconv.io.sources.arrays import ArraySource
from streamconv.io.sources.pattern import TestPattern
from streamconv.io.sinks.sink import CallbackSink, Sink
from streamconv.run.stats import RunStats


def _collect(frames, specs, *, ring, backend="cpu", max_frames=None):
    got, metas = [], []
    sink = CallbackSink(lambda frame, meta: (got.append(frame.copy()), metas.append(meta)))
    stats = streamconv.Pipeline(ArraySource(frames), specs, sink, backend=backend, ring=ring,
                                max_frames=max_frames).run()
    return got, metas, stats


@pytest.mark.parametrize("ring", [1, 2, 3, 5])
def test_ring_depths_give_identical_frames_in_order(rng, ring):
    frames = [rng.integers(0, 256, (24, 31, 3), dtype=np.uint8) for _ in range(9)]
    got, metas, stats = _collect(frames, ["gaussian:sigma=1", "edge"], ring=ring)
    backend = CpuBackend([parse_filter("gaussian:sigma=1"), parse_filter("edge")])
    assert len(got) == 9 and stats.frames == 9
    assert [m.index for m in metas] == list(range(9))
    for frame, out in zip(frames, got):
        np.testing.assert_array_equal(out, backend.apply(frame))


def test_max_frames_and_stats(rng):
    frames = [rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(6)]
    got, _, stats = _collect(frames, ["box:size=3"], ring=3, max_frames=4)
    assert len(got) == 4
    summary = stats.summary()
    for stage in ("read", "kernel", "write", "latency"):
        assert set(summary[stage]) == {"p50", "p95", "p99", "max", "mean"}
        assert summary[stage]["p50"] <= summary[stage]["max"]
    assert stats.fps > 0 and "4 frames" in stats.format_table()


def test_stats_json_round_trip(tmp_path):
    stats = RunStats(backend="cpu")
    for ms in (1.0, 2.0, 3.0):
        stats.record({"read": ms / 1e3, "latency": 2 * ms / 1e3})
    stats.wall_seconds = 0.5
    path = tmp_path / "stats.json"
    stats.write_json(path)
    data = json.loads(path.read_text())
    assert data["frames"] == 3 and data["fps"] == pytest.approx(6.0)
    assert data["stages_ms"]["read"]["p50"] == pytest.approx(2.0)
    assert data["stages_ms"]["latency"]["max"] == pytest.approx(6.0)
    assert data["samples_ms"]["read"] == pytest.approx([1.0, 2.0, 3.0])


def test_test_pattern_moves_and_counts():
    pattern = TestPattern(64, 48, fps=25, frames=3)
    frames = list(pattern)
    assert len(frames) == 3 and frames[0].shape == (48, 64, 3)
    assert not np.array_equal(frames[0], frames[1])
    assert pattern.time_base == pytest.approx(1 / 25)


def test_on_frame_callback_sees_every_frame():
    seen = []
    stats = streamconv.Pipeline(TestPattern(32, 24, frames=5), ["identity"], None, backend="cpu",
                                on_frame=lambda frame, meta: seen.append((meta.index,
                                                                          frame.shape))).run()
    assert seen == [(i, (24, 32, 3)) for i in range(5)] and stats.frames == 5


class _FailingSource(ArraySource):
    def __init__(self, frames, fail_at):
        super().__init__(frames)
        self.fail_at = fail_at

    def read_into(self, buffer):
        if self._index == self.fail_at:
            raise StreamError(f"decoding failed at frame {self.fail_at}")
        return super().read_into(buffer)


class _RecordingSink(Sink):
    def __init__(self):
        self.frames, self.closed, self.aborted = [], False, False

    def send(self, frame, meta):
        self.frames.append(meta.index)
        self.frames_written += 1

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted = True


def test_source_error_keeps_frames_before_it(rng):
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(6)]
    sink = _RecordingSink()
    with pytest.raises(StreamError, match="frame 4"):
        streamconv.Pipeline(_FailingSource(frames, 4), ["box:size=3"], sink, backend="cpu",
                            ring=2).run()
    assert sink.frames == [0, 1, 2, 3] and sink.closed and not sink.aborted


def test_sink_error_stops_the_run_without_hanging(rng):
    frames = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(50)]

    class Broken(_RecordingSink):
        def send(self, frame, meta):
            if meta.index == 2:
                raise StreamError("disk full")
            super().send(frame, meta)

    sink = Broken()
    with pytest.raises(StreamError, match="disk full"):
        streamconv.Pipeline(ArraySource(frames), ["identity"], sink, backend="cpu").run()
    assert sink.frames == [0, 1] and sink.closed


def test_error_before_any_frame_leaves_nothing(rng):
    sink = _RecordingSink()
    with pytest.raises(StreamError):
        streamconv.Pipeline(_FailingSource([np.zeros((4, 4, 3), np.uint8)] * 3, 0), [], sink,
                            backend="cpu").run()
    assert sink.aborted and not sink.closed


def test_stop_from_another_thread_drains_and_finishes():
    sink = _RecordingSink()
    pipeline = streamconv.Pipeline(TestPattern(64, 48, frames=None), ["box:size=3"], sink,
                                   backend="cpu")
    timer = threading.Timer(0.3, pipeline.stop)
    timer.start()
    stats = pipeline.run()
    timer.join()
    assert stats.interrupted and sink.closed and stats.frames == len(sink.frames) > 0
    assert sink.frames == list(range(len(sink.frames)))


def test_bad_ring_and_backend_names():
    with pytest.raises(streamconv.SettingsError,
                       match="ring must be an integer from 1 to 64, got 0"):
        streamconv.Pipeline(TestPattern(8, 8, frames=1), [], None, ring=0)
    with pytest.raises(streamconv.SettingsError, match="unknown backend"):
        streamconv.Pipeline(TestPattern(8, 8, frames=1), [], None, backend="opencl")


def test_a_pipeline_closed_without_running_releases_its_input_and_writes_nothing(
        tmp_path, sample_clip):
    output = tmp_path / "out.mp4"
    level = av.logging.get_level()
    with streamconv.Pipeline(str(sample_clip), ["edge"], str(output), backend="cpu") as pipeline:
        assert pipeline.source.width == 640
    assert av.logging.get_level() == level  # the source's damage watch has stopped
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StreamError, match="already run or been closed"):
        pipeline.run()
    pipeline.close()  # a second close does nothing


def test_a_pipeline_runs_once():
    pipeline = streamconv.Pipeline(TestPattern(32, 24, frames=3), ["box"], backend="cpu")
    assert pipeline.run().frames == 3
    with pytest.raises(StreamError, match="already run or been closed"):
        pipeline.run()
    pipeline.close()


class _InputsBeside(Sink):
    """Records, for each output, which of ``frames`` the input handed beside it is."""

    def __init__(self, frames: list[np.ndarray]) -> None:
        self.frames, self.pairs = frames, []

    shows_input = True

    def send(self, frame, meta) -> None:
        raise AssertionError("a sink that shows the input is sent it")

    def send_with_input(self, frame, source_frame, meta) -> None:
        self.pairs.append((meta.index, next((k for k, known in enumerate(self.frames)
                                            if np.array_equal(known, source_frame)), None)))
        self.frames_written += 1


@pytest.mark.parametrize("ring", [1, 3])
def test_each_output_of_a_temporal_chain_comes_with_its_own_input(ring):
    """A centred window puts out frame i after frame i + 2 is read, and its last outputs through
    free slots: the input beside each (a side-by-side display's left panel) is still frame i."""
    frames = list(TestPattern(64, 48, fps=30, frames=12))
    sink = _InputsBeside(frames)
    streamconv.Pipeline("test:64x48@30,frames=12", ["tmean:frames=5"], sink, backend="cpu",
                        ring=ring).run()
    assert sink.pairs == [(index, index) for index in range(12)]
