"""RunStats in bounded memory: a live run records frames without end, so its timings must not
grow with them, and the percentiles it reports must stay within the stated error of the exact
ones (streamconv.run.stats.RELATIVE_ERROR), while short runs stay exact.
"""

from __future__ import annotations

import json
import sys
import tracemalloc

import numpy as np
import pytest

from streamconv.run.stats import PERCENTILES, RELATIVE_ERROR, SAMPLE_CAP, RunStats, StageTimes
from streamconv.run.timeline import FrameTimeline


def _deep_size(times: StageTimes) -> int:
    """Bytes a StageTimes holds: the object, its raw-sample array, its histogram and the ints in
    it."""
    buckets = times._buckets
    return (sys.getsizeof(times) + sys.getsizeof(times._recent) + sys.getsizeof(buckets)
            + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in buckets.items()))


def _latencies(rng: np.random.Generator, count: int) -> np.ndarray:
    """Seconds shaped like a live run's: a log-normal body around 5 ms and rare stalls of 0.1-2
    s."""
    values = rng.lognormal(np.log(5e-3), 0.6, count)
    stalls = rng.random(count) < 0.002
    values[stalls] = rng.uniform(0.1, 2.0, stalls.sum())
    return values


def test_two_million_frames_hold_bounded_memory_and_accurate_percentiles(rng):
    count = 2_000_000
    kernel = _latencies(rng, count)
    latency = kernel + rng.uniform(1e-3, 4e-3, count)
    stats = RunStats()
    pairs = list(zip(kernel.tolist(), latency.tolist()))
    record = stats.record
    for kernel_s, latency_s in pairs[:-100_000]:
        record({"kernel": kernel_s, "latency": latency_s})
    # The last 100,000 frames under tracemalloc (it slows every allocation, so not all 2M):
    # a list of every time would grow by 2 x 100,000 x 32 bytes (6.4 MB) here.
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for kernel_s, latency_s in pairs[-100_000:]:
            record({"kernel": kernel_s, "latency": latency_s})
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown
    assert stats.frames == count
    for stage in ("kernel", "latency"):
        held = _deep_size(stats.stages[stage])
        # raw window + histogram, whatever the count
        assert held < SAMPLE_CAP * 8 + 256 * 1024, held

    summary = stats.summary()
    assert not stats.exact
    for stage, values in (("kernel", kernel), ("latency", latency)):
        ms = values * 1e3
        for p in PERCENTILES:
            assert summary[stage][f"p{p}"] == pytest.approx(np.percentile(ms, p),
                                                            rel=RELATIVE_ERROR), (stage, p)
        assert summary[stage]["max"] == ms.max()  # exact, not estimated
        assert summary[stage]["mean"] == pytest.approx(ms.mean(), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-7, 1e-4, 1e-2, 3.0], ids=["0.1us", "0.1ms", "10ms", "3s"])
def test_histogram_percentiles_within_stated_error_at_every_scale(rng, scale):
    times = StageTimes(cap=10)  # the histogram from the 11th time on
    values = scale * rng.pareto(2.5, 50_000) + scale  # heavy-tailed, as stalls make latencies
    for value in values.tolist():
        times.add(value)
    assert not times.exact
    ps = (0, 1, 25, 50, 90, 99, 99.9, 100)
    for got, want in zip(times.percentiles(ps), np.percentile(values, ps)):
        assert got == pytest.approx(want, rel=RELATIVE_ERROR)


def test_short_run_percentiles_and_samples_are_exact(rng):
    values = rng.lognormal(-5, 1, 500)
    stats = RunStats(sample_cap=500)
    for value in values.tolist():
        stats.record({"read": value, "latency": 2 * value})
    assert stats.exact
    summary = stats.summary()
    for p in PERCENTILES:
        assert summary["read"][f"p{p}"] == pytest.approx(np.percentile(values * 1e3, p), rel=1e-12)
    assert stats.samples["read"] == values.tolist()
    assert "within" not in stats.format_table()


def test_samples_keep_the_last_cap_frames_in_order():
    stats = RunStats(sample_cap=4)
    for frame in range(10):
        stats.record({"read": frame / 1e3, "write": 1e-3})
    assert stats.frames == 10
    assert stats.samples["read"] == pytest.approx([0.006, 0.007, 0.008, 0.009])
    assert stats.stages["read"].count == 10 and stats.stages["read"].maximum == pytest.approx(0.009)
    assert stats.summary()["read"]["mean"] == pytest.approx(4.5)  # over all 10, not the 4 kept
    assert "percentiles within 0.5%" in stats.format_table()


def test_json_says_how_many_samples_were_kept(tmp_path):
    stats = RunStats(backend="cpu", sample_cap=3)
    for ms in (1.0, 2.0, 3.0, 4.0, 5.0):
        stats.record({"read": ms / 1e3})
    stats.wall_seconds = 1.0
    path = tmp_path / "stats.json"
    stats.write_json(path)
    data = json.loads(path.read_text())
    assert data["frames"] == 5 and data["samples_cap"] == 3
    assert data["samples_kept"] == {"read": 3}
    assert data["samples_ms"]["read"] == pytest.approx([3.0, 4.0, 5.0])
    assert data["percentiles_exact"] is False and \
        data["percentile_relative_error"] == RELATIVE_ERROR
    assert data["stages_ms"]["read"]["max"] == pytest.approx(5.0)
    assert data["stages_ms"]["read"]["p50"] == pytest.approx(3.0, rel=RELATIVE_ERROR)


def test_zero_and_out_of_range_times_are_counted():
    times = StageTimes(cap=1)
    for value in (0.0, 0.0, 5e-10, 2e6, 1e-3):
        times.add(value)
    assert times.count == 5 and times.minimum == 0.0 and times.maximum == 2e6
    low, high = times.percentiles((0, 100))
    assert low == 0.0 and high == 2e6  # the extremes are exact
    assert times.percentiles((50,))[0] < 1e-9  # the middle time, 5e-10 s, within 1 ns


def test_empty_stats_summarise_to_nothing():
    stats = RunStats()
    assert stats.summary() == {} and stats.samples == {} and stats.exact
    assert "0 frames" in stats.format_table()
    assert stats.to_dict()["samples_kept"] == {}


def test_merged_stage_times_describe_every_frame_of_both(rng):
    """Two records merged (a segmented run's stages) are the record of all their times at once."""
    first, second = rng.exponential(1e-3, 700), rng.exponential(2e-3, 500)
    merged, whole = StageTimes(cap=1000), StageTimes(cap=1000)
    part_a, part_b = StageTimes(cap=1000), StageTimes(cap=1000)
    for value in first:
        part_a.add(value)
        whole.add(value)
    for value in second:
        part_b.add(value)
        whole.add(value)
    merged.merge(part_a)
    merged.merge(part_b)
    assert (merged.count, merged.minimum, merged.maximum) == (whole.count, whole.minimum,
                                                              whole.maximum)
    assert merged.total == pytest.approx(whole.total)
    assert merged.recent() == whole.recent()  # the last 1000, oldest first
    assert not merged.exact and merged.percentiles([50, 99]) == whole.percentiles([50, 99])


def test_the_timeline_keeps_the_last_frames_and_where_counts_went_up():
    timeline = FrameTimeline(cap=4)
    for frame in range(10):
        timeline.add(at=frame / 10, dropped=frame // 3, damaged=1 if frame >= 7 else 0)
    data = timeline.to_dict()
    assert data["first_frame"] == 6 and data["start_s"] == [0.6, 0.7, 0.8, 0.9]
    # from frame 3 one drop, from 6 two, from 7 damage too, from 9 three drops
    assert data["events"] == [[3, 1, 0], [6, 2, 0], [7, 2, 1], [9, 3, 1]]
    unknown = FrameTimeline(cap=2)
    unknown.add()
    assert unknown.to_dict() == {"first_frame": 0, "start_s": [None], "events": []}


def test_a_timeline_of_drops_at_every_frame_stays_bounded():
    timeline = FrameTimeline(cap=100)
    for frame in range(10_000):
        timeline.add(at=frame / 1000, dropped=frame)
    data = timeline.to_dict()
    assert len(data["start_s"]) == 100 and len(data["events"]) == 100
    assert data["events"][0] == [9900, 9900, 0] and timeline.count == 10_000


def test_merged_timelines_follow_each_other_and_add_their_counts():
    first, second = FrameTimeline(cap=5), FrameTimeline(cap=5)
    for frame in range(3):
        first.add(at=frame, dropped=1)
        second.add(at=10 + frame, damaged=frame)
    first.merge(second)
    data = first.to_dict()
    assert first.count == 6 and data["first_frame"] == 1
    assert data["start_s"] == [1, 2, 10, 11, 12]
    assert data["events"] == [[0, 1, 0], [4, 1, 1], [5, 1, 2]]


def test_stats_json_carries_the_timeline(tmp_path):
    stats = RunStats(sample_cap=3)
    for frame in range(5):
        stats.record({"read": 1e-3}, at=frame / 25, dropped=2 if frame == 4 else 0)
    data = stats.to_dict()["timeline"]
    assert data == {"first_frame": 2, "start_s": [0.08, 0.12, 0.16], "events": [[4, 2, 0]]}
