"""A segmented run: one file cut at keyframes, the segments filtered and encoded at once, and
the encoded parts joined into one output (``streamconv run --segments N``, :func:`run_segments`).

Each segment is a :class:`~streamconv.run.pipeline.Pipeline` of a
:class:`~streamconv.io.sources.segment.SegmentSource` into a video-only part file (made by
:meth:`~streamconv.jobs.segment_work.SegmentWork.open`), run in a thread of this process (on the
cuda backend the segments take the GPUs of ``devices`` in turn) or as a Ray task
(:mod:`streamconv.jobs.ray.segments`); the parts are then remuxed, not re-encoded, with the input's
audio and subtitles copied once (:mod:`streamconv.io.sinks.join`). The output has the frames, pts
and audio packets of a one-piece run. The parts live in a hidden temporary folder beside the output,
removed at the end whatever happens (an error, Ctrl-C): a segmented run leaves its output whole or
not at all.
"""

from __future__ import annotations

import logging
import re
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

from .ray.batch import ray_module
from ..frames.arguments import check_flag, check_options, keywords_of
from ..errors import InputError, Interrupted, OutputError, SettingsError
from ..chain.filters import FilterStage, parse_chain
from ..backends.temporal_chain import chain_context
from ..frames.checks import DEFAULT_MAX_PIXELS, as_count
from ..interrupts import signals_held, stop_on_signals
from ..io.sources.file import FileSource
from ..io.ffmpeg.formats import output_format
from ..io.sinks.join import join_parts
from ..io.open import check_sink
from ..io.sources.segment import Segment, keyframe_times, plan_cuts, pts_shift
from ..io.sinks.targets import check_target
from ..files.leftovers import hold_folder_lock, release_writer_lock, remove_abandoned
from ..run.pipeline import Pipeline
from ..run.options import SETTINGS, check_passed_on
from ..run.settings import EncodeSettings, RunSettings, settings_from, sink_options_with
from .segment_work import PART_FORMATS, SegmentWork
from .worker import Running
from .ray.segments import run_on_ray
from ..run.stats import RunStats, combine_stats

log = logging.getLogger(__name__)


def plan_segments(source: str | Path, segments: int, *, video_stream: int = 0,
                  context: tuple[int, int] = (0, 0)) -> list[Segment]:
    """Cut ``source`` into up to ``segments`` segments of near equal duration at its video
    keyframes (demuxing only), with a notice when there are fewer keyframes than cuts; into one
    where demuxing finds it damaged (see :func:`filter_parts`). ``context``: the frames a chain
    with stages across frames reads before and after each frame (:func:`chain_context`), read
    around each cut too.

    Returns:
        The segments in order (:class:`streamconv.io.sources.segment.Segment`, pts in the
        stream's time base).
    """
    found = keyframe_times(source, video_stream)
    shift = pts_shift(found.earliest)
    if found.damaged or found.reported:
        log.warning("%s is damaged: it is filtered in one piece, so that its output does not "
                    "depend on where it would be cut", source)
        return [Segment(0, None, None, shift)]
    planned = [replace(cut, shift=shift).with_context(found, *context)
               for cut in plan_cuts(found.keyframes, found.last, segments)]
    if len(planned) < segments:
        log.warning("%s has %d keyframe(s) to cut at: %d segment(s) instead of %d", source,
                    max(0, len(found.keyframes) - 1), len(planned), segments)
    return planned


def filter_parts(work: SegmentWork, plan: list[Segment], parts_dir: Path, *,
                 ray: str | bool | None, jobs: int | None,
                 running: Running | None) -> tuple[list[Path], list[RunStats]]:
    """Filter the plan's segments into parts in ``parts_dir``: their paths in order, and each
    segment's stats.

    A damaged input decodes differently from a cut on (a decoder starting afresh at a damaged
    keyframe, frames out of order across a cut, a seek the damage misleads), and a segmented
    run's output must not depend on where it is cut: where a segment finds damage, or cannot
    reach its keyframe, the input is filtered again in one piece, as one segment.
    """
    try:
        runner = _SegmentRunner(work, plan, parts_dir, ray=ray)
        results = runner.run(jobs, running)
        if len(plan) == 1 or not any(stats.damage for stats in results):
            return runner.parts, _said(results, ray)
    except InputError:
        if len(plan) == 1:
            raise
    log.warning("%s is damaged: filtering it again in one piece, so that its output does not "
                "depend on where it was cut", work.source)
    runner = _SegmentRunner(work, [Segment(0, None, None, plan[0].shift)], parts_dir, ray=ray)
    return runner.parts, _said(runner.run(jobs, running), ray)


def _said(results: list[RunStats], ray: str | bool | None) -> list[RunStats]:
    """The segments' ``results``, their damage said here where they ran as Ray tasks (a
    segment's pipeline says it, in the Ray worker's log)."""
    damage = list(dict.fromkeys(phrase for stats in results for phrase in stats.damage))
    if ray not in (None, False, "") and damage:
        log.warning("input damaged: %s; every frame that decoded was processed (%d)",
                    "; ".join(damage), sum(stats.frames for stats in results))
    return results


def parts_prefix(output: str | Path) -> str:
    """How the hidden folder of ``output``'s parts is named before its random ending, beside the
    output: ``.streamconv-segments-NAME.`` (NAME cut to 100 characters, within any file system's
    name limit), so that a batch can find what a killed run of its own left."""
    return f".streamconv-segments-{Path(output).name[:100]}."


def parts_folder_regex(output: str | Path) -> re.Pattern:
    """The exact names of ``output``'s parts folders: :func:`parts_prefix` and mkdtemp's 8
    characters."""
    return re.compile(re.escape(parts_prefix(output)) + r"[a-z0-9_]{8}")


def run_segments(source: str | Path, filters: Sequence[str | FilterStage], output: str | Path, *,
                 segments: int, jobs: int | None = None,
                 devices: Sequence[int] | str | None = None, backend: str = "auto",
                 copy_streams: bool = True, overwrite: bool = False, format: str | None = None,
                 muxer_options: dict[str, str] | None = None,
                 sink_options: dict[str, Any] | None = None,
                 source_options: dict[str, Any] | None = None, running: Running | None = None,
                 decoder: str = "auto", ray: str | bool | None = None,
                 settings: RunSettings | None = None, encode: EncodeSettings | None = None,
                 **pipeline_options: Any) -> RunStats:
    """Filter one video file in ``segments`` pieces at once and join them into ``output``.

    Frames are decoded by libavcodec (host memory) or NVDEC (device memory, a decoder session per
    segment) and filtered as in a one-piece run: the output has the same frames, pts and packets.

    Args:
        source: a local video file (seekable: not a pipe, URL, camera or pattern).
        filters: the chain, as for Pipeline.
        output: a file (not a pipe, sequence or URL), whole or absent.
        segments: segments wanted (>= 1; fewer where the input has too few keyframes).
        jobs: segments run at once (None: all of them); on Ray, segments per GPU (None: 1).
        devices: GPUs the cuda backend's segments take in turn (None: [0]; "all": every one);
            not with ray.
        settings: the run's settings (:class:`streamconv.run.settings.RunSettings`; the backend
            resolved here; NVDEC only when named, a session per segment; not max_frames), or as
            keywords: ``backend``, ``decoder`` and the others in ``pipeline_options`` (not both).
        encode: the encoder's (:class:`streamconv.run.settings.EncodeSettings`), the same for
            every part, or in ``sink_options`` (codec, pix_fmt, crf, preset, bitrate; not both).
        sink_options: the parts' other FileSink options.
        copy_streams: copy the input's audio and subtitles into the output.
        overwrite, format, muxer_options: as for FileSink (the output's).
        source_options: FileSource options (video_stream, hwaccel, input_options).
        pipeline_options: Pipeline's other keywords, given to every segment's (not max_frames).
        running: a batch's running pipelines, holding the run as one (aborted with them; signals
            the batch's).
        ray: each segment a Ray task (:mod:`streamconv.jobs.ray.segments`) on the cluster at this
            address (True: RAY_ADDRESS's or a new local one); input and output (parts beside it)
            on a shared path.

    Returns: RunStats of the whole run (see :func:`streamconv.run.stats.combine_stats`), wall time
        from plan to output.
    Raises: the errors of a one-piece run; Interrupted on SIGINT/SIGTERM (nothing is left).
    """
    # long: a public call's docstring naming its twenty arguments
    segments = as_count(segments, "segments", 1)
    check_flag(copy_streams, "copy_streams")
    source_options, sink_options, pipeline_options = _check_options(
        source_options, sink_options_with(encode, sink_options), pipeline_options)
    run = _segment_settings(settings, backend, decoder, pipeline_options, source_options)
    _check_before_work(source, output, overwrite=overwrite, format=format, ray=ray, devices=devices,
                       source_options=source_options)
    started = time.perf_counter()
    stages = parse_chain(filters)
    plan = plan_segments(source, segments, video_stream=source_options.get("video_stream", 0),
                         context=chain_context(stages))
    work = SegmentWork.make(source, stages, output, settings=run, devices=devices, format=format,
                            sink_options=sink_options, source_options=source_options,
                            pipeline_options=pipeline_options)
    with _parts_folder(output) as parts_dir:
        parts, results = filter_parts(work, plan, parts_dir, ray=ray, jobs=jobs, running=running)
        copied = join_parts(parts, output, source=source, copy_streams=copy_streams,
                            overwrite=overwrite, format=format, muxer_options=muxer_options,
                            shift=plan[0].shift)
    return combine_stats(results, time.perf_counter() - started, copied)


_NOT_PASSED_ON = {"source", "filters", "sink", "sink_options", "settings", "backend", "device",
                  "decoder"}
"""Pipeline's arguments that run_segments gives each segment's Pipeline itself."""


@contextmanager
def _parts_folder(output: str | Path) -> Iterator[Path]:
    """A new hidden folder for ``output``'s parts beside it, locked while in use, removed after;
    the parts folders of ``output`` that killed runs left are removed first."""
    folder = Path(output).resolve().parent
    remove_abandoned(folder, parts_folder_regex(output).fullmatch, folders=True)
    parts_dir: Path | None = None
    lock = None
    try:
        with signals_held():  # a Ctrl-C between making the folder and keeping its name left it
            parts_dir = Path(tempfile.mkdtemp(prefix=parts_prefix(output), dir=folder))
            lock = hold_folder_lock(parts_dir)
        yield parts_dir
    finally:
        if parts_dir is not None:
            shutil.rmtree(parts_dir, ignore_errors=True)
        release_writer_lock(lock)


def _segment_settings(settings: RunSettings | None, backend: str, decoder: str,
                      pipeline_options: dict, source_options: dict) -> RunSettings:
    """The segments' RunSettings, from ``settings`` or the keywords (taken out of
    ``pipeline_options``); the depth and pixel limit also go into ``source_options``.

    Raises:
        SettingsError: max_frames given (each segment would stop at its own count).
    """
    given = {name: pipeline_options.pop(name) for name in SETTINGS if name in pipeline_options}
    run = settings_from(settings, backend=backend, decoder=decoder, **given)
    if run.max_frames is not None or "max_frames" in pipeline_options:
        raise SettingsError("a segmented run filters the whole input: max_frames does not apply")
    if run.depth is not None:
        source_options["depth"] = run.depth
    if run.max_pixels != DEFAULT_MAX_PIXELS:
        source_options["max_pixels"] = run.max_pixels
    return run


def _check_options(source_options: Any, sink_options: Any,
                   pipeline_options: Any) -> tuple[dict, dict, dict]:
    """FileSource's, FileSink's and Pipeline's options of a segmented run, each one the segments
    take and of its type (InputError, OutputError, SettingsError naming one), as dicts."""
    sink_options = check_sink(None, sink_options, names=("output", "sink_options"))
    if {"format", "overwrite"} & sink_options.keys():  # the joined output's: run_segments' own
        raise OutputError("run_segments takes format and overwrite itself, not in sink_options")
    source_options = check_options(source_options, "source_options", InputError,
                                   taken=keywords_of(FileSource) - {"path", "copy_streams"})
    pipeline_options = check_passed_on(pipeline_options, keywords_of(Pipeline) - _NOT_PASSED_ON,
                                       "run_segments")
    return source_options, sink_options, pipeline_options


def _check_before_work(source, output, *, overwrite: bool, format: str | None,
                       ray: str | bool | None, devices, source_options: dict) -> None:
    """What a one-piece run would refuse (the output, the input's errors), and the options a
    segmented run cannot take, before anything is cut or written."""
    if ray not in (None, False, ""):
        if devices is not None:
            raise SettingsError("on Ray the cluster grants each segment its GPU: "
                                "devices does not apply")
        ray_module()  # the extra is there, before anything is cut
    check_target(output, overwrite=overwrite, protect=(str(source),), format=format)
    # a one-piece run renumbers its frames; the parts keep their pts
    if output_format(output, format) == "avi":
        raise OutputError(f"a segmented run cannot join its parts into AVI, which keeps no "
                          f"timestamps: {output} "
                          f"(write .mkv, .mp4, .mov or .ts, or run it in one piece)")
    FileSource(source, copy_streams=False, **source_options).close()


class _SegmentRunner:
    """Runs the plan's segments as Pipelines in threads, or as Ray tasks; stops them all on a
    failure or signal."""

    def __init__(self, work: SegmentWork, plan: list[Segment], parts_dir: Path, *,
                 ray: str | bool | None) -> None:
        self.work, self.plan = work, plan
        self.ray = ray if ray not in (False, "") else None
        self.parts = [parts_dir / f"part{segment.index:04d}{PART_FORMATS[work.format]}"
                      for segment in plan]
        self._running = Running()  # the segments' pipelines, aborted together
        self._lock = threading.Lock()
        self._stopping: int | None = None  # the signal that stopped the run, or -1 after a failure

    def run(self, jobs: int | None, running: Running | None = None) -> list[RunStats]:
        """Run every segment, ``jobs`` at once (None: all; on Ray, per GPU, None: 1); their stats
        in order. With ``running`` (a batch's), the run is kept there as this thread's, to be
        aborted with the batch's pipelines.

        Raises:
            The first segment's error (the others are aborted), or Interrupted on a signal.
        """
        if running is not None:
            running.add(self)  # aborted at once if the batch is already aborting
        try:
            with stop_on_signals(self._on_signal):
                if self.ray is None:
                    return self._in_threads(as_count(jobs or len(self.plan), "jobs", 1))
                results = run_on_ray(self.work, self.plan, self.parts,
                                     jobs=as_count(jobs or 1, "jobs", 1),
                                     address=None if self.ray is True else str(self.ray),
                                     stopped=lambda: self._stopping is not None)
        finally:
            if running is not None:
                running.remove()
        if results is None:
            raise Interrupted(self._stopping if self._stopping > 0 else signal.SIGTERM)
        return results

    def _in_threads(self, jobs: int) -> list[RunStats]:
        """Every segment in a thread pool of ``jobs``; a failure aborts the rest."""
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="streamconv-segment")
        try:
            futures = [pool.submit(self._run_one, segment) for segment in self.plan]
            wait(futures, return_when=FIRST_EXCEPTION)
            if any(f.done() and f.exception() is not None for f in futures):
                self._abort_all(-1)  # one segment failed: the output cannot be whole
                wait(futures)
        except BaseException:
            self._abort_all(-1)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return self._outcome(futures)

    @property
    def stats(self) -> RunStats:
        """The frames the segments have written so far (a batch's status line counts them)."""
        return RunStats(frames=self._running.frames())

    def abort(self, signum: int | None = None) -> None:
        """Abort every segment at once, from any thread (a batch's second signal); :meth:`run`
        then raises Interrupted and nothing is joined."""
        self._abort_all(signum if signum is not None else -1)

    def _outcome(self, futures: list[Future]) -> list[RunStats]:
        """The segments' stats; or the signal that stopped them, else the first real failure."""
        if self._stopping is not None and self._stopping > 0:
            raise Interrupted(self._stopping)
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise next((e for e in errors if not isinstance(e, Interrupted)), errors[0])
        return [future.result() for future in futures]

    def _on_signal(self, signum: int) -> None:
        log.warning("%s: stopping the segments; a segmented run leaves no output when stopped",
                    signal.Signals(signum).name)
        self._abort_all(signum)

    def _abort_all(self, why: int) -> None:
        with self._lock:
            if self._stopping is None:
                self._stopping = why
        self._running.abort_all(why if why > 0 else None)  # and any segment's pipeline made after

    def _run_one(self, segment: Segment) -> RunStats:
        """One segment in a thread of this process, on the devices in turn; aborted when the run
        stops."""
        with self._lock:
            if self._stopping is not None:
                raise Interrupted(self._stopping if self._stopping > 0 else signal.SIGTERM)
        device = self.work.devices[segment.index % len(self.work.devices)]
        pipeline = self.work.open(segment, self.parts[segment.index], device)
        self._running.add(pipeline)  # aborted at once if the run stopped meanwhile
        try:
            return pipeline.run()
        finally:
            self._running.remove()
