"""Running a batch's inputs: one input through its own Pipeline (:func:`run_input`), in a thread of
the batch's process or in a worker process (:func:`worker_process`).

One Python process drives about as many frames a second as its threads can get the interpreter
lock for (some 450 1080p frames a second on a 16-core host); beyond that a batch shares its
inputs among worker processes, each running its share in threads. Only the batch's own process
writes the manifest: workers report each input's start and end on a queue.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import Interrupted, StreamconvError, run_exit_code
from .filters import FilterStage
from .manifest import BatchRecord
from .pipeline import Pipeline
from .stats import RunStats

log = logging.getLogger(__name__)


@dataclass
class RunSettings:
    """How every input of a batch runs (picklable: it goes to worker processes as it is)."""

    filters: list[FilterStage]
    backend: str
    options: dict[str, Any]  # Pipeline's border, kernel, ring, decoder, colour
    sink_options: dict[str, Any]
    overwrite: bool = False
    ours: set[str] = field(default_factory=set)  # outputs an earlier batch wrote: ours to replace
    open_ahead: bool = True  # open each worker's next input while its current one runs

    def replaces(self, output: str) -> bool:
        """Whether ``output`` may be replaced: --overwrite, or an earlier batch of ours wrote it."""
        return self.overwrite or output in self.ours


class Running:
    """The pipelines running now in this process, so that a second signal can abort them; a
    segmented input's run stands in for its segments (see :func:`streamconv.segments.run_segments`:
    like a Pipeline it has ``abort(signum)`` and ``stats.frames``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipelines: dict[int, Pipeline] = {}
        self._aborted = False
        self._signal: int | None = None

    def add(self, pipeline: Pipeline) -> None:
        """Keep a pipeline about to run; one made after :meth:`abort_all` is aborted at once."""
        with self._lock:
            self._pipelines[threading.get_ident()] = pipeline
            aborted = self._aborted
        if aborted:
            pipeline.abort(self._signal)

    def remove(self) -> None:
        with self._lock:
            self._pipelines.pop(threading.get_ident(), None)

    def frames(self) -> int:
        """Frames the running pipelines have written so far."""
        with self._lock:
            return sum(p.stats.frames for p in self._pipelines.values() if p.stats is not None)

    def abort_all(self, signum: int | None) -> None:
        """Abort every running pipeline, and any added from now on."""
        with self._lock:
            self._aborted, self._signal = True, signum
            pipelines = list(self._pipelines.values())
        for pipeline in pipelines:
            pipeline.abort(signum)


class Prefetch:
    """The next input of a worker opened ahead (source, decoder, sink: ``Pipeline(...)``) on a thread
    of its own while the worker's current input runs, so that the next one's first frame follows
    the end of the current one without the file's opening and probing in between.

    Args:
        record: the input; it stays pending until it runs.
        device: the GPU it will run on. settings: the batch's.
    """

    def __init__(self, record: BatchRecord, device: int, settings: RunSettings) -> None:
        self.record = record
        self.started = time.perf_counter()
        self._pipeline: Pipeline | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(device, settings), daemon=True,
                                        name="streamconv-batch-prefetch")
        self._thread.start()

    def _open(self, device: int, settings: RunSettings) -> None:
        try:
            self._pipeline = open_input(self.record, device, settings)
        except BaseException as exc:  # raised again where the input runs, and judged there
            self._error = exc

    def pipeline(self) -> Pipeline:
        """The opened pipeline, once opening ends; raises what opening raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._pipeline

    def discard(self) -> None:
        """Let an input that will not run go (the batch stops): its pipeline is closed, nothing written."""
        self._thread.join()
        if self._pipeline is not None:
            self._pipeline.close()


def open_input(record: BatchRecord, device: int, settings: RunSettings) -> Pipeline:
    """The Pipeline of one input (its source and sink open; nothing written until it runs)."""
    Path(record.output).parent.mkdir(parents=True, exist_ok=True)
    sink_options = {**settings.sink_options, "overwrite": settings.replaces(record.output)}
    return Pipeline(record.input, settings.filters, record.output, backend=settings.backend,
                    device=device, sink_options=sink_options, **settings.options)


def run_input(record: BatchRecord, device: int, settings: RunSettings, running: Running,
              prefetch: Prefetch | None = None) -> None:
    """Run one input through its own Pipeline (opened here, or ahead by ``prefetch``); fill
    ``record`` with how it ended (never raises for the input's own failure: that is the record's
    status). ``record.first_frame_ms`` counts from the input's turn: when it starts to run."""

    def one_piece() -> tuple[RunStats, int | None]:
        pipeline = prefetch.pipeline() if prefetch is not None else open_input(record, device, settings)
        running.add(pipeline)
        return pipeline.run(), pipeline.stop_signal

    record.opened_ahead = prefetch is not None
    judge_run(record, one_piece, running, started=prefetch.started if prefetch is not None else None)


def judge_run(record: BatchRecord, work: Callable[[], tuple[RunStats, int | None]], running: Running, *,
              started: float | None = None) -> None:
    """Call ``work()`` for one input, which runs it and returns its stats and the signal that
    stopped it early (None: it ran to the end), and fill ``record`` with how it ended: its
    figures, or failed / interrupted with the error (never raises for the input's own failure).

    Args:
        running: where ``work`` kept what it ran (this thread's entry is removed at the end).
        started: when the input began to be opened (None: now), for ``record.seconds``.
    """
    turn = time.perf_counter()
    started = turn if started is None else started
    try:
        stats, stop_signal = work()
        _finished(record, stats, stop_signal)
        if stats.first_written is not None:
            record.first_frame_ms = round((stats.first_written - turn) * 1e3, 2)
    except Interrupted as exc:
        record.status, record.exit_code, record.error = "interrupted", exc.exit_code, "aborted by a signal"
    except StreamconvError as exc:
        record.status, record.exit_code, record.error = "failed", exc.exit_code, str(exc)
    except Exception as exc:  # one input's surprise must not stop the others
        record.status, record.exit_code, record.error = "failed", 1, f"internal error: {type(exc).__name__}: {exc}"
    finally:
        running.remove()
        record.seconds = round(time.perf_counter() - started, 3)
        if record.status == "failed":
            log.warning("%s failed: %s", record.input, record.error)


def _finished(record: BatchRecord, stats, stop_signal: int | None) -> None:
    """Fill a record from a finished run's stats; a run stopped early is not complete."""
    record.frames, record.decoder = stats.frames, stats.decoder
    record.fps = round(stats.fps, 2)
    record.damage = list(stats.damage)
    record.exit_code = run_exit_code(bool(stats.damage), stop_signal)
    if stop_signal is not None:
        record.status = "interrupted"
        return
    record.status = "damaged" if stats.damage else "done"
    record.bytes = Path(record.output).stat().st_size


def _work(device: int, settings: RunSettings, tasks, results, stop_taking, orphaned: threading.Event,
          running: Running) -> None:
    """A worker process's thread: run tasks until a None, the batch stops taking, or it is orphaned,
    each next input opened ahead (:class:`Prefetch`) while the current one runs."""
    ahead, last = None, False  # (index, Prefetch) of the next input; its None seen: end after it
    try:
        while not stop_taking.is_set() and not orphaned.is_set():
            if ahead is not None:
                (index, prefetch), ahead = ahead, None
                record = prefetch.record
            elif last:
                return
            else:
                try:
                    task = tasks.get(timeout=0.1)
                except queue.Empty:
                    continue
                if task is None:
                    return
                (index, record), prefetch = task, None
            if not last:
                following = _take_now(tasks)
                last = following is None
                if following not in (None, _NOTHING):
                    ahead = following[0], Prefetch(following[1], device, settings)
            record.status, record.device = "running", device if settings.backend == "cuda" else None
            results.put(("running", index, device))
            run_input(record, device, settings, running, prefetch)
            results.put(("ended", index, asdict(record)))
    finally:
        if ahead is not None:
            ahead[1].discard()


_NOTHING = object()


def _take_now(tasks) -> Any:
    """The next task if one is there at once (a task, or None: no more), else _NOTHING."""
    try:
        return tasks.get_nowait()
    except queue.Empty:
        return _NOTHING


def worker_process(settings: RunSettings, devices: list[int], tasks, results, stop_taking, abort,
                   log_level: int) -> None:
    """A worker process: one thread per entry of ``devices`` takes ``(index, record)`` tasks until
    a None (or ``stop_taking``), and reports ``("running", index, device)`` and ``("ended", index,
    record fields)`` on ``results``; ``abort`` set aborts the running pipelines, and so does the
    batch's process dying (their outputs are discarded: no manifest would record them). Signals
    are the batch's process's to handle: here they are ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=log_level, format="streamconv: %(message)s", force=True)
    running = Running()
    parent, orphaned = os.getppid(), threading.Event()

    threads = [threading.Thread(target=_work, args=(device, settings, tasks, results, stop_taking, orphaned, running),
                                daemon=True) for device in devices]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if os.getppid() != parent:  # the batch's process was killed: its manifest cannot record more
            orphaned.set()
        if abort.wait(0.1) or orphaned.is_set():
            running.abort_all(None)
            break
    for thread in threads:
        thread.join()
