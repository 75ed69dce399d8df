"""Per-frame, per-stage timings: percentiles, a summary table and JSON, in bounded memory.

Stage names are the same in stats, logs and JSON:
``read`` (decode/capture and conversion into the slot), ``upload``, ``kernel``,
``download`` (GPU work, timed with CUDA events; the CPU backend reports its work as
``kernel``), ``write`` (encode/display) and ``latency`` (from the start of ``read``
to the end of ``write``).

A live run records frames without end, so no stage keeps every time. Each keeps:

- the exact count, sum, minimum and maximum;
- the raw times of the last ``sample_cap`` frames (default SAMPLE_CAP, 10,000: 80 KB a
  stage), for ``samples``, the status line and ``samples_ms`` in the JSON;
- a histogram over logarithmic buckets: bucket ``i`` holds the times in
  (GAMMA^(i-1), GAMMA^i] seconds, GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR), and
  stands for the value 2 GAMMA^i / (GAMMA + 1), within RELATIVE_ERROR (0.5%) of every time in
  it. Times are clamped to MIN_SECONDS..MAX_SECONDS (1 ns to 10^6 s), so there are at most
  about 3,500 buckets (tens of KB) however long the run. A fixed histogram rather than a
  merging sketch (t-digest, KLL): its error is relative, so it holds for p99 of a 0.1 ms
  kernel as for a 2 s stall, it is exact in count, and each frame costs one log().

Percentiles are exact (NumPy's, linear interpolation) while every time of the stage is still
kept raw, so a file run of up to 10,000 frames reports exactly what it did before; past that
they come from the histogram, each within RELATIVE_ERROR of NumPy's on the same times. The
mean and the maximum are always exact.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..files.publish import write_atomically
from .timeline import FrameTimeline

STAGES = ("read", "upload", "kernel", "download", "write", "latency")
PERCENTILES = (50, 95, 99)

SAMPLE_CAP = 10_000
"""Raw per-frame times kept per stage: the last this many frames (5.5 minutes at 30 fps)."""

RELATIVE_ERROR = 0.005
"""Most relative error of a percentile from the histogram (0.5%)."""

GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(GAMMA)

MIN_SECONDS = 1e-9
"""Times below this (1 ns, and 0) share the lowest bucket: their error is under 1 ns, not
relative."""

MAX_SECONDS = 1e6
"""Times above this (11.6 days) share the highest bucket (the exact maximum is kept besides)."""

_MIN_INDEX = math.ceil(math.log(MIN_SECONDS) / _LOG_GAMMA)
_MAX_INDEX = math.ceil(math.log(MAX_SECONDS) / _LOG_GAMMA)


class StageTimes:
    """The times of one stage, in memory that does not grow with the number of frames.

    Attributes:
        count: times recorded.
        total: their sum (seconds).
        minimum, maximum: the smallest and largest (seconds; inf / -inf before the first).
        cap: raw times kept (the last ``cap``).
    """

    __slots__ = ("count", "total", "minimum", "maximum", "cap", "_recent", "_next", "_buckets")

    def __init__(self, cap: int = SAMPLE_CAP) -> None:
        if cap < 1:
            raise ValueError(f"sample cap must be >= 1, got {cap}")
        self.count = 0
        self.total = 0.0
        self.minimum = math.inf
        self.maximum = -math.inf
        self.cap = cap
        self._recent = array("d")  # a ring once full: _next is the oldest
        self._next = 0
        self._buckets: dict[int, int] = {}  # bucket index -> count; at most ~3,500 keys

    def add(self, seconds: float) -> None:
        """Record one time (seconds)."""
        self.count += 1
        self.total += seconds
        if seconds < self.minimum:
            self.minimum = seconds
        if seconds > self.maximum:
            self.maximum = seconds
        recent = self._recent
        if len(recent) < self.cap:
            recent.append(seconds)
        else:
            recent[self._next] = seconds
            self._next = (self._next + 1) % self.cap
        if seconds <= MIN_SECONDS:
            index = _MIN_INDEX
        elif seconds >= MAX_SECONDS:
            index = _MAX_INDEX
        else:
            index = math.ceil(math.log(seconds) / _LOG_GAMMA)
        buckets = self._buckets
        buckets[index] = buckets.get(index, 0) + 1

    def merge(self, other: "StageTimes") -> None:
        """Take in another record of the same stage (another segment's): counts, extremes and the
        histogram add up; the raw times kept are this one's, then the other's, the last ``cap``."""
        self.count += other.count
        self.total += other.total
        self.minimum, self.maximum = min(self.minimum, other.minimum), max(self.maximum,
                                                                           other.maximum)
        for index, count in other._buckets.items():
            self._buckets[index] = self._buckets.get(index, 0) + count
        self._recent = array("d", (self.recent() + other.recent())[-self.cap:])
        self._next = 0  # oldest first: the ring's start

    @property
    def exact(self) -> bool:
        """True while every time recorded is still kept raw (percentiles are then exact)."""
        return self.count == len(self._recent)

    def recent(self) -> list[float]:
        """The raw times kept (seconds), oldest first: the last ``cap`` recorded."""
        recent = self._recent
        return (recent[self._next:] + recent[:self._next]).tolist()

    def percentiles(self, ps) -> list[float]:
        """The ``ps`` percentiles (0..100) of the times, seconds, as ``numpy.percentile`` (linear)
        computes them: exactly while :attr:`exact`, else from the histogram, within
        RELATIVE_ERROR of it (for times of 1 ns and more)."""
        if self.count == 0:
            return [math.nan for _ in ps]
        if self.exact:
            # A copy (not a view): a view would pin the array, and the next add() could not grow it.
            return [float(v) for v in np.percentile(np.array(self._recent, np.float64), ps)]
        ordered = sorted(self._buckets.items())
        edges = np.cumsum([count for _, count in ordered])  # frames up to and including each bucket

        def at_rank(rank: int) -> float:
            """The estimate of the rank-th smallest time (0-based)."""
            if rank == 0:
                return self.minimum
            if rank == self.count - 1:
                return self.maximum
            index = ordered[int(np.searchsorted(edges, rank, side="right"))][0]
            value = 0.0 if index == _MIN_INDEX else 2 * GAMMA ** index / (GAMMA + 1)
            return min(max(value, self.minimum), self.maximum)  # the extremes are known exactly

        result = []
        for p in ps:
            rank = p / 100 * (self.count - 1)
            low = math.floor(rank)
            below = at_rank(low)
            above = at_rank(min(low + 1, self.count - 1))
            result.append(below + (rank - low) * (above - below))
        return result


@dataclass
class RunStats:
    """Timings of one pipeline run.

    Attributes:
        backend: the backend's one-line description.
        decoder: who decoded the input (e.g. ``nvdec (h264, device 0)``, ``cpu (h264)``), empty
            for sources that are not decoded.
        frames: frames written to the sink.
        dropped: frames a live source dropped because the pipeline was behind, or a
            reconnecting network input missed while it was away.
        wall_seconds: from the first read to the last write.
        first_written: when the first frame was written (``time.perf_counter()`` of the run's
            process; None before one is): with the run's own start, its time to first frame.
        interrupted: True if the run was stopped (Ctrl-C, SIGTERM) before the source ended.
        resizes: times the frame size changed mid-stream (the slots were re-allocated).
        decode_errors: damaged packets or frames of the input that were skipped or concealed.
        damage: what was found wrong with the input, one phrase per kind (empty: nothing).
        delay_frames: frames each output lags its input by (stages across frames with look-ahead:
            output t waits for frame t + delay); 0 for 2-D chains and causal ones.
        delay_seconds: that lag at the source's frame rate (0 when unknown).
        sample_cap: raw times kept per stage (the last ``sample_cap`` frames' ones).
        stages: stage name -> its StageTimes (bounded: see the module's docstring).
        timeline: when each of the last ``sample_cap`` frames began to be read, and where frames
            were dropped or damage found (:class:`streamconv.run.timeline.FrameTimeline`).
    """

    backend: str = ""
    decoder: str = ""
    frames: int = 0
    dropped: int = 0
    wall_seconds: float = 0.0
    first_written: float | None = None
    interrupted: bool = False
    resizes: int = 0
    decode_errors: int = 0
    damage: list[str] = field(default_factory=list)
    delay_frames: int = 0
    delay_seconds: float = 0.0
    sample_cap: int = SAMPLE_CAP
    stages: dict[str, StageTimes] = field(default_factory=dict, repr=False)
    timeline: FrameTimeline = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.timeline = FrameTimeline(self.sample_cap)

    def set_delay(self, frames: int, frame_rate) -> int:
        """Note that each output lags its input by ``frames`` frames (at ``frame_rate`` frames a
        second, if known); returns ``frames``."""
        rate = float(frame_rate or 0)
        self.delay_frames, self.delay_seconds = frames, frames / rate if rate > 0 else 0.0
        return frames

    def record(self, times: dict[str, float], *, at: float | None = None, dropped: int = 0,
               damaged: int = 0) -> None:
        """Add one frame's stage times (seconds) and its place in the run (see
        FrameTimeline.add); constant memory per stage, however many frames."""
        self.timeline.add(at, dropped, damaged)
        stages = self.stages
        for stage, seconds in times.items():
            times_of = stages.get(stage)
            if times_of is None:
                times_of = stages[stage] = StageTimes(self.sample_cap)
            times_of.add(seconds)
        self.frames += 1

    @property
    def samples(self) -> dict[str, list[float]]:
        """Stage name -> the raw per-frame seconds kept, oldest first: every frame's for runs of
        up to ``sample_cap`` frames, else the last ``sample_cap`` (a new dict at each call)."""
        return {stage: times.recent() for stage, times in self.stages.items()}

    @property
    def fps(self) -> float:
        """Frames per second over the whole run."""
        return self.frames / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def exact(self) -> bool:
        """True if every stage's percentiles are exact (no stage has dropped raw times)."""
        return all(times.exact for times in self.stages.values())

    def summary(self) -> dict[str, dict[str, float]]:
        """Stage -> {p50, p95, p99, max, mean} in milliseconds, for stages that have samples.
        max and mean are exact; the percentiles too while :attr:`exact`, else within
        RELATIVE_ERROR (0.5%)."""
        result = {}
        for stage in STAGES:
            times = self.stages.get(stage)
            if times is None or not times.count:
                continue
            values = times.percentiles(PERCENTILES)
            row = {f"p{p}": 1e3 * value for p, value in zip(PERCENTILES, values)}
            row["max"] = 1e3 * times.maximum
            row["mean"] = 1e3 * times.total / times.count
            result[stage] = row
        return result

    def to_dict(self) -> dict:
        """Everything, JSON-ready: totals, the per-stage summary (ms) and the raw samples (ms).

        ``samples_ms`` holds each stage's last ``samples_cap`` frames' times (all of them for
        shorter runs), oldest first; ``samples_kept`` says how many per stage, out of
        ``frames``. ``percentiles_exact`` is False when the percentiles of ``stages_ms`` come
        from the histogram (within ``percentile_relative_error``). ``timeline`` says when the
        frames of ``samples_ms`` began to be read, and where frames were dropped or damage
        found (see FrameTimeline.to_dict).
        """
        samples = self.samples
        return {
            "backend": self.backend,
            "decoder": self.decoder,
            "frames": self.frames,
            "dropped": self.dropped,
            "interrupted": self.interrupted,
            "resizes": self.resizes,
            "decode_errors": self.decode_errors,
            "damage": self.damage,
            "delay_frames": self.delay_frames,
            "delay_seconds": self.delay_seconds,
            "wall_seconds": self.wall_seconds,
            "fps": self.fps,
            "stages_ms": self.summary(),
            "percentiles_exact": self.exact,
            "percentile_relative_error": 0.0 if self.exact else RELATIVE_ERROR,
            "samples_cap": self.sample_cap,
            "samples_kept": {k: len(vals) for k, vals in samples.items() if vals},
            "samples_ms": {k: [v * 1e3 for v in vals] for k, vals in samples.items() if vals},
            "timeline": self.timeline.to_dict(),
        }

    def write_json(self, path: str | Path, *, overwrite: bool = False, protect=(),
                   what: str = "stats JSON", outcome: dict | None = None) -> None:
        """Write :meth:`to_dict` to ``path``, whole or not at all
        (:func:`streamconv.files.publish.write_atomically`);
        ``outcome`` (such as the run's ``exit_code`` and ``error``) comes first in the object.

        Raises:
            OutputError: ``path`` exists (without ``overwrite``), is one of ``protect`` (input
                specs, or a role -> spec mapping), or cannot be written whole.
        """
        write_atomically(path, json.dumps({**(outcome or {}), **self.to_dict()}, indent=1) + "\n",
                         overwrite=overwrite, protect=protect, what=what)

    def format_table(self) -> str:
        """A plain-text table: one row per stage with p50/p95/p99/max in ms, then totals."""
        header = f"{'stage':<9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        lines = [header, "-" * len(header)]
        for stage, row in self.summary().items():
            lines.append(f"{stage:<9}" + "".join(f"{row[k]:>9.3f}"
                                                 for k in ("p50", "p95", "p99", "max")))
        tail = f"{self.frames} frames in {self.wall_seconds:.2f} s = {self.fps:.1f} fps"
        if self.dropped:
            tail += f", {self.dropped} dropped"
        if self.decode_errors:
            tail += f", {self.decode_errors} damaged input packet(s) or frame(s)"
        if self.delay_frames:
            tail += f", output {self.delay_frames} frame(s) behind the input"
        if self.interrupted:
            tail += " (interrupted)"
        if not self.exact:
            tail += f"; percentiles within {100 * RELATIVE_ERROR:g}%"
        decoded = f", decoded by {self.decoder}" if self.decoder else ""
        lines.append(tail + f" [{self.backend}{decoded}]")
        return "\n".join(lines)


def combine_stats(results: Sequence[RunStats], seconds: float,
                  found: Sequence[str] = ()) -> RunStats:
    """One RunStats for a segmented run: the segments' frames, errors and damage (each phrase
    once) with the damage ``found`` apart (by the join), their stage times
    merged, the first frame any of them wrote, their chain's delay, and ``seconds`` of wall
    time."""
    total = RunStats(backend=results[0].backend, decoder=results[0].decoder, wall_seconds=seconds)
    total.first_written = min((s.first_written for s in results if s.first_written is not None),
                              default=None)
    # Every segment runs the same chain, so each output lags its input as in one piece.
    total.delay_frames = max(stats.delay_frames for stats in results)
    total.delay_seconds = max(stats.delay_seconds for stats in results)
    for stats in results:
        total.frames += stats.frames
        total.decode_errors += stats.decode_errors
        total.resizes += stats.resizes
        total.damage += [phrase for phrase in stats.damage if phrase not in total.damage]
        for stage, times in stats.stages.items():
            total.stages.setdefault(stage, StageTimes(total.sample_cap)).merge(times)
        total.timeline.merge(stats.timeline)
    total.damage += [phrase for phrase in found if phrase not in total.damage]
    return total
