"""Several sources in one run: each through its own Pipeline, all at once, in threads of this
process.

Every source keeps its own ring, CUDA streams, decoder and stats; the threads share the
process's CUDA context, compiled kernels and imports (as a batch's threads do). A source that
fails to open, or fails or is lost mid-run (a camera that cannot be reopened), ends alone: the
others go on. Signals are the main thread's: a first SIGINT/SIGTERM stops every source (each
finishes its output), a second aborts them all.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..frames.arguments import check_flag, check_sequence, keywords_of
from ..errors import (EXIT_DAMAGED_INPUT, InputError, Interrupted, OutputError, StreamconvError,
                      run_exit_code)
from ..chain.filters import FilterStage
from ..interrupts import stop_on_signals
from ..io.sources.source import Source
from ..run.pipeline import Pipeline
from ..run.options import check_passed_on
from ..run.stats import RunStats

log = logging.getLogger(__name__)

PLACEHOLDER = "{n}"
"""Stands for a source's 0-based index (its place among the SOURCEs) in an output name."""


def output_for(output: str | Path | None, index: int) -> str | None:
    """``output`` with every ``{n}`` replaced by ``index`` (0-based); None stays None."""
    return None if output is None else str(output).replace(PLACEHOLDER, str(index))


@dataclass
class SourceResult:
    """What one source of a multi-source run did.

    Attributes:
        index: its 0-based place among the sources. source: its spec or description.
        stats: its timings (None if it never opened). error: why it ended early, or None.
        stop_signal: the signal that stopped it, or None.
    """

    index: int
    source: str
    stats: RunStats | None = None
    error: BaseException | None = None
    stop_signal: int | None = None

    @property
    def exit_code(self) -> int:
        """The code a run of this source alone would end with: its error's, 128 + a signal,
        13 if its input was damaged, else 0."""
        if self.error is not None:
            return getattr(self.error, "exit_code", 1)
        return run_exit_code(self.stats is not None and bool(self.stats.damage), self.stop_signal)

    def to_dict(self) -> dict:
        """JSON-ready: the index, source, exit code, error message and the stats' own dict."""
        record = {"index": self.index, "source": self.source, "exit_code": self.exit_code,
                  "error": None if self.error is None else str(self.error)}
        return {**record, **(self.stats.to_dict() if self.stats is not None else {})}


@dataclass
class MultiResult:
    """Every source's :class:`SourceResult`, in the order the sources were given."""

    results: list[SourceResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The worst source's code: a failure (the first source's that failed) before a signal's
        128 + N, before 13 (damaged input), before 0."""
        codes = [result.exit_code for result in self.results]
        failures = [code for code in codes if code not in (0, EXIT_DAMAGED_INPUT) and code < 128]
        for group in (failures, [code for code in codes if code >= 128], [c for c in codes if c]):
            if group:
                return group[0]
        return 0

    @property
    def frames(self) -> int:
        """Frames written by all the sources together."""
        return sum(result.stats.frames for result in self.results if result.stats is not None)


class MultiRun:
    """Run several already-made Pipelines at once, each in its own thread, and collect the results.

    Args:
        pipelines: one per source, in order; an exception in place of a pipeline is a source
            that failed to open (its result carries the error, the others run).
        labels: each source's name for the results (default: its source's description).

    :meth:`run` owns the pipelines from then on (each closes its source and sink).
    """

    def __init__(self, pipelines: Sequence[Pipeline | BaseException],
                 labels: Sequence[str] | None = None) -> None:
        self.pipelines = list(pipelines)
        names = labels or \
            [p.source.describe() if isinstance(p, Pipeline) else "?" for p in self.pipelines]
        self.results = [SourceResult(n, str(name)) for n, name in enumerate(names)]
        for result, item in zip(self.results, self.pipelines):
            if not isinstance(item, Pipeline):
                result.error = item
        self._ended: list[threading.Event] = []

    def stop(self, signum: int | None = None) -> None:
        """Ask every source to stop and finish its output; safe from any thread and signal
        handlers."""
        for pipeline in self._running():
            pipeline.stop(signum)

    def abort(self, signum: int | None = None) -> None:
        """Stop every source at once, outputs discarded (see :meth:`Pipeline.abort`)."""
        for pipeline in self._running():
            pipeline.abort(signum)

    def _running(self) -> list[Pipeline]:
        return [p for p in self.pipelines if isinstance(p, Pipeline)]

    def _stop_on_signal(self, signum: int) -> None:
        log.warning("%s: stopping every source; finishing their outputs (a second signal aborts "
                    "without them)", signal.Signals(signum).name)
        self.stop(signum)

    def run(self) -> MultiResult:
        """Run every pipeline until each ends (its source ends, stop(), a key, an error).

        Returns:
            MultiResult: each source's stats or error. One source's error never stops the
            others; a second signal aborts them all and raises :class:`Interrupted`.
        """
        threads = []
        for result, pipeline in zip(self.results, self.pipelines):
            if isinstance(pipeline, Pipeline):
                ended = threading.Event()
                self._ended.append(ended)
                threads.append(threading.Thread(target=self._run_one,
                                                args=(result, pipeline, ended),
                                                name=f"streamconv-source-{result.index}",
                                                daemon=True))
        with stop_on_signals(self._stop_on_signal):
            for thread in threads:
                thread.start()
            try:
                self._wait()
            except Interrupted:
                self.abort()
                self._wait()
                raise
        return MultiResult(self.results)

    def _wait(self) -> None:
        # Event waits with a timeout, not Thread.join(): the main thread stays free for signals.
        for ended in self._ended:
            while not ended.wait(0.25):
                pass

    @staticmethod
    def _run_one(result: SourceResult, pipeline: Pipeline, ended: threading.Event) -> None:
        try:
            result.stats = pipeline.run()
        except BaseException as exc:  # this source's end: kept in its result, the others go on
            result.stats = pipeline.stats if pipeline.stats is not None and \
                pipeline.stats.frames else None
            result.error = exc
            if isinstance(exc, Interrupted):
                pass  # aborted by the second signal, which the main thread reports
            elif isinstance(exc, StreamconvError):
                log.warning("source %d (%s) ended: %s", result.index, result.source, exc)
            else:
                log.error("source %d (%s) failed", result.index, result.source, exc_info=exc)
        finally:
            result.stop_signal = pipeline.stop_signal
            ended.set()


def open_all(makers: Sequence[Callable[[], Pipeline]]) -> list[Pipeline | BaseException]:
    """Call each maker in turn; a source that fails to open (a StreamconvError or OSError) stands
    as its exception, so that the others still run. Anything else (Ctrl-C, a bug) closes the
    pipelines already made and is raised."""
    made: list[Pipeline | BaseException] = []
    try:
        for maker in makers:
            try:
                made.append(maker())
            except (StreamconvError, OSError) as exc:
                made.append(exc)
    except BaseException:
        for item in made:
            if isinstance(item, Pipeline):
                item.close()
        raise
    return made


def run_many(sources: Sequence[Source | str | Path], filters: Sequence[str | FilterStage] = (),
             output: str | Path | None = None, *, display: bool = False,
             **options: Any) -> MultiResult:
    """Filter several sources at once, each through its own Pipeline, in one process.

    Args:
        sources: Sources or SOURCE specs (``webcam:0``, ``test:640x480@30,live``, paths, URLs).
        filters: the chain every source runs, as for :class:`Pipeline`.
        output: where each source's frames go: a name with ``{n}`` (the source's 0-based index:
            ``cam{n}.mp4`` gives ``cam0.mp4``, ``cam1.mp4``...), or None to discard them. A name
            without ``{n}`` is refused for more than one source (they would share one file).
        display: show every source's filtered frames tiled in one window
            (:class:`streamconv.io.sinks.tiles.TileWall`); q or Esc stops them all.
        options: Pipeline's keyword arguments (``settings``, a
            :class:`streamconv.run.settings.RunSettings` made once, or backend, ring,
            max_frames...; sink_options...), the same for every source.

    Returns:
        MultiResult: per source its RunStats (frames arrive as (H, W, C) uint8 or uint16
        host arrays; nothing of them is kept) or its error; ``exit_code`` is the worst.

    Raises:
        OutputError: ``output`` has no ``{n}`` and there is more than one source.
        DisplayError: ``display`` and no window can be opened here.
        InputError, SettingsError, OutputError: ``sources`` no list, an option Pipeline does
            not take or of the wrong type (as for Pipeline), before any source is opened.
    """
    sources = check_sequence(sources, "sources", InputError)  # not a path's characters one by one
    check_flag(display, "display")
    options = check_passed_on(options, keywords_of(Pipeline) - {"source", "filters", "sink"},
                              "run_many")
    if output is not None and len(sources) > 1 and PLACEHOLDER not in str(output):
        raise OutputError(f"{len(sources)} sources into one output {str(output)!r}: put "
                          f"{PLACEHOLDER} "
                          f"in its name (the source's index from 0)")
    labels = [s.describe() if isinstance(s, Source) else str(s) for s in sources]
    wall = None
    if display:
        from ..io.sinks.tiles import TileWall  # OpenCV's GUI only when a window is asked for
        wall = TileWall()
    makers = [functools.partial(Pipeline, sources[n], filters, output_for(output, n), **options)
              for n in range(len(sources))]
    return run_tiled(makers, labels, wall)


def run_tiled(makers: Sequence[Callable[[], Pipeline]], labels: Sequence[str],
              wall=None) -> MultiResult:
    """Open every pipeline that ``makers`` build (each shown in its own tile of ``wall``, a
    :class:`streamconv.io.sinks.tiles.TileWall`, when given), run them all at once, then close the
    wall; ``labels`` name the sources in tiles and results."""
    def shown(index: int, make: Callable[[], Pipeline]) -> Callable[[], Pipeline]:
        def opened() -> Pipeline:
            pipeline = make()
            if wall is not None:
                # a scale or crop stage sends frames of another size than the source's
                pipeline.sink = wall.add(pipeline.source, labels[index], pipeline.sink,
                                         shape=pipeline.output_shape)
            return pipeline
        return opened

    try:
        return MultiRun(open_all([shown(n, make) for n, make in enumerate(makers)]),
                        list(labels)).run()
    finally:
        if wall is not None:
            wall.close()
