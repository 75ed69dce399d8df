"""A sink that steers its run (a display) is attached to a narrow handle of it, never the
Pipeline: it stops the run, swaps the chain and reads the status, and reaches nothing else."""

from __future__ import annotations

import numpy as np

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import parse_chain
from streamconv.io.sinks.sink import Sink
from streamconv.io.sinks.steering import RunHandle
from streamconv.io.sources.pattern import LivePattern, TestPattern


class Steering(Sink):
    """Names the chain when attached, swaps it after frame 1 and stops the run after frame 7 (the
    swap is at most the ring's frames late), as a display's keys would; keeps each frame with the
    status seen beside it."""

    def __init__(self, name: str = "first") -> None:
        self.name_given = name
        self.run: RunHandle | None = None
        self.seen: list[tuple[int, bool, str | None, np.ndarray]] = []

    def attach(self, run: RunHandle) -> None:
        self.run = run
        run.name_chain(self.name_given)

    def send(self, frame: np.ndarray, meta) -> None:
        status = self.run.status()
        self.seen.append((meta.index, status.stopping, status.label, frame.copy()))
        if meta.index == 1:
            self.run.swap_chain(["identity"], "second")
        if meta.index == 7:
            self.run.stop()


def test_a_steering_sink_swaps_the_chain_and_stops_the_run_through_its_handle():
    sink = Steering()
    inputs = list(TestPattern(32, 24, frames=50))
    pipeline = streamconv.Pipeline(TestPattern(32, 24, frames=50), ["box:size=3"], sink,
                                   backend="cpu", ring=2)
    stats = pipeline.run()
    handle = sink.run
    assert isinstance(handle, RunHandle) and not isinstance(handle, streamconv.Pipeline)
    assert sorted(n for n in dir(handle) if not n.startswith("_")) == \
        ["name_chain", "status", "stop", "swap_chain"]
    assert 8 <= stats.frames < 50 and stats.interrupted
    assert [index for index, *_ in sink.seen] == list(range(stats.frames))
    assert sink.seen[0][1:3] == (False, "first") and sink.seen[-1][2] == "second"
    box = CpuBackend(parse_chain(["box:size=3"]))
    np.testing.assert_array_equal(sink.seen[0][3], box.apply(inputs[0]))
    np.testing.assert_array_equal(sink.seen[-1][3], inputs[stats.frames - 1])  # identity now
    status = handle.status()
    assert not status.live and status.stopping and status.dropped == 0
    assert status.label == pipeline.filter_label == "second"


def test_the_handle_keeps_a_name_given_before_and_says_a_source_is_live():
    sink = Steering("from the sink")
    pipeline = streamconv.Pipeline(LivePattern(16, 16, fps=100), [], sink, backend="cpu")
    pipeline.filter_label = "from the caller"  # as the CLI names the chain it was given
    pipeline.run()
    assert sink.seen[0][2] == "from the caller"
    assert sink.run.status().live
