"""Running a batch's inputs: one input through its own Pipeline (:func:`run_input`), in a thread of
the batch's process or in a worker process (:func:`worker_process`).

One Python process drives about as many frames a second as its threads can get the interpreter
lock for (some 450 1080p frames a second on a 16-core host); beyond that a batch shares its
inputs among worker processes, each running its share in threads. Only the batch's own process
writes the manifest: workers report each input's start and end on a queue.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..errors import Interrupted, OutputError, StreamconvError, run_exit_code
from ..chain.filters import FilterStage
from .manifest import FINISHED, BatchRecord, file_identity, not_a_file
from ..run.pipeline import Pipeline
from ..run.settings import RunSettings
from ..files.standard_streams import steady_standard_streams
from ..run.stats import RunStats

log = logging.getLogger(__name__)


THREADS_PER_PROCESS = 4
"""Inputs at once per process before another worker process pays (the interpreter lock: one
process of four 1080p transcodes ran at 0.98 of four encoders' own rate, of eight at 0.70)."""


def default_processes(workers: int) -> int:
    """Processes for ``workers`` inputs at once: one per THREADS_PER_PROCESS of them."""
    return max(1, -(-workers // THREADS_PER_PROCESS))


def worker_plan(devices: list[int], jobs: int, processes: int | None,
                pending: int) -> tuple[list[int], int]:
    """(the device of each worker thread, the worker processes they are shared among): ``jobs``
    threads per device, the devices in turn, but never more threads than ``pending`` inputs
    (``--jobs 100000`` on one input starts one thread, not 25000 processes); ``processes`` as
    given (None: :func:`default_processes`), never more than the threads."""
    threads = [devices[k % len(devices)] for k in range(max(1, min(jobs * len(devices), pending)))]
    return threads, min(processes or default_processes(len(threads)), len(threads))


@dataclass
class BatchSettings:
    """How every input of a batch runs (picklable: it goes to worker processes as it is).

    Attributes:
        filters: the chain. run: the run's settings, backend resolved (each input's device
            set where it runs). sink_options: every output's FileSink options (the encoder's).
        overwrite, ours: which outputs may be replaced (:meth:`replaces`).
        open_ahead: each worker opens its next input while its current one runs.
    """

    filters: list[FilterStage]
    run: RunSettings
    sink_options: dict[str, Any]
    overwrite: bool = False
    # outputs still as a batch of the manifest published them
    ours: set[str] = field(default_factory=set)
    open_ahead: bool = True  # open each worker's next input while its current one runs

    def replaces(self, output: str) -> bool:
        """Whether ``output`` may be replaced: --overwrite, or it is still exactly what an earlier
        batch of this manifest published (:func:`streamconv.jobs.manifest.resume_plan`)."""
        return self.overwrite or output in self.ours


class Running:
    """The pipelines running now in this process, so that a second signal can abort them; a
    segmented input's run stands in for its segments (see
    :func:`streamconv.jobs.segments.run_segments`: like a Pipeline it has ``abort(signum)`` and
    ``stats.frames``)."""

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

    def frames_here(self) -> int:
        """Frames the pipeline this thread runs (or ran last, until :meth:`remove`) has
        written so far."""
        with self._lock:
            pipeline = self._pipelines.get(threading.get_ident())
        stats = getattr(pipeline, "stats", None)
        return stats.frames if stats is not None else 0

    def abort_all(self, signum: int | None) -> None:
        """Abort every running pipeline, and any added from now on."""
        with self._lock:
            self._aborted, self._signal = True, signum
            pipelines = list(self._pipelines.values())
        for pipeline in pipelines:
            pipeline.abort(signum)


class Prefetch:
    """The next input of a worker opened ahead (source, decoder, sink: ``Pipeline(...)``) on a
    thread
    of its own while the worker's current input runs, so that the next one's first frame follows
    the end of the current one without the file's opening and probing in between.

    Args:
        record: the input; it stays pending until it runs.
        device: the GPU it will run on. settings: the batch's.
    """

    def __init__(self, record: BatchRecord, device: int, settings: BatchSettings) -> None:
        self.record = record
        self._pipeline: Pipeline | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(device, settings), daemon=True,
                                        name="streamconv-batch-prefetch")
        self._thread.start()

    def _open(self, device: int, settings: BatchSettings) -> None:
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
        """Let an input that will not run go (the batch stops): its pipeline is closed, nothing
        written."""
        self._thread.join()
        if self._pipeline is not None:
            self._pipeline.close()


class AheadGate:
    """Whether a worker may take one more input, to open it ahead (:class:`Prefetch`) while its
    current one runs: only while more inputs are pending than the other workers that will take
    their next one from the queue (those not holding one opened ahead), so that no worker finds
    the queue empty and ends while another holds an input it has not started.

    Args:
        counts: [inputs pending, workers not holding an input opened ahead]: a list (threads of
            one process) or a ``multiprocessing`` Array("i", 2) shared by worker processes.
    """

    def __init__(self, counts) -> None:
        self.counts = counts
        self._lock = counts.get_lock() if hasattr(counts, "get_lock") else threading.Lock()

    def take(self) -> bool:
        """Claim a pending input to run next (False: none is left)."""
        with self._lock:
            if self.counts[0] <= 0:
                return False
            self.counts[0] -= 1
            return True

    def take_ahead(self) -> bool:
        """Claim a pending input to open ahead, if the other workers that take from the queue
        leave one over; the caller then holds it."""
        with self._lock:
            pending, takers = self.counts[0], self.counts[1]
            if pending <= takers - 1:
                return False
            self.counts[0], self.counts[1] = pending - 1, takers - 1
            return True

    def start_held(self) -> None:
        """The input held ahead starts: its worker takes from the queue again."""
        with self._lock:
            self.counts[1] += 1

    def leave(self, holding: bool) -> None:
        """A worker ends (a worker holding an input was not counted as one that takes)."""
        if not holding:
            with self._lock:
                self.counts[1] -= 1


def take_inputs(gate: AheadGate, take: Callable[[], Any], device: int, settings: BatchSettings,
                stopped: Callable[[], bool], run: Callable[[Any, Prefetch | None], None]) -> None:
    """A worker's loop (a thread of the batch's process, or of a worker process): claim pending
    inputs through ``gate`` and ``take()`` each (an ``(index, record)`` task; None: the batch
    stops) until none is left or ``stopped()``, and ``run(task, prefetch)`` it, the next one
    opened ahead where the gate allows (an input opened but not run stays pending)."""
    ahead: tuple[Any, Prefetch] | None = None
    try:
        while not stopped():
            if ahead is not None:
                (task, prefetch), ahead = ahead, None
                gate.start_held()
            else:
                task, prefetch = (take() if gate.take() else None), None
                if task is None:
                    return
            if settings.open_ahead and gate.take_ahead():
                following = take()
                if following is not None:
                    ahead = following, Prefetch(following[1], device, settings)
            run(task, prefetch)
    finally:
        gate.leave(holding=ahead is not None)
        if ahead is not None:
            ahead[1].discard()


def open_input(record: BatchRecord, device: int, settings: BatchSettings) -> Pipeline:
    """The Pipeline of one input (its source and sink open; nothing written until it runs); the
    input's size and mtime are recorded as it is opened (``--resume`` compares them)."""
    note_input(record)
    make_output_folder(Path(record.output).parent)
    sink_options = {**settings.sink_options, "overwrite": settings.replaces(record.output)}
    return Pipeline(record.input, settings.filters, record.output,
                    settings=replace(settings.run, device=device), sink_options=sink_options)


def make_output_folder(folder: Path) -> None:
    """Make an output's folder and its missing parents (OUTDIR, removed meanwhile; with --recursive,
    the input's subfolder).

    Raises:
        OutputError: a file is in the way, or the OS refuses (permissions, a read-only disk).
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "a file is in the way" if isinstance(exc,
                                                   (FileExistsError,
                                                    NotADirectoryError)) else exc.strerror
        raise OutputError(f"cannot make the output folder {folder}: {why or exc}") from None


def note_input(record: BatchRecord) -> None:
    """Record the input's size and mtime (ns) as it is about to be read (None: not there).

    Raises:
        InputError: something else than a regular file is there now (a FIFO put in its place
            since the batch found it would hold its worker, and the batch, for ever).
    """
    identity = file_identity(record.input)
    if identity is None and os.path.exists(record.input):
        raise not_a_file(record.input, now=True)
    record.input_bytes, record.input_mtime_ns = identity if identity is not None else (None, None)


def run_input(record: BatchRecord, device: int, settings: BatchSettings, running: Running,
              prefetch: Prefetch | None = None) -> None:
    """Run one input through its own Pipeline (opened here, or ahead by ``prefetch``); fill
    ``record`` with how it ended (never raises for the input's own failure: that is the record's
    status). ``record.seconds`` and ``record.first_frame_ms`` count from the input's turn: when
    it starts to run, not when it began to be opened ahead."""

    def one_piece() -> tuple[RunStats, int | None]:
        pipeline = prefetch.pipeline() if prefetch is not None else open_input(record, device,
                                                                               settings)
        running.add(pipeline)
        return pipeline.run(), pipeline.stop_signal

    record.opened_ahead = prefetch is not None
    judge_run(record, one_piece, running)


def judge_run(record: BatchRecord, work: Callable[[], tuple[RunStats, int | None]],
              running: Running) -> None:
    """Call ``work()`` for one input, which runs it and returns its stats and the signal that
    stopped it early (None: it ran to the end), and fill ``record`` with how it ended: its
    figures, or failed / interrupted with the error (never raises for the input's own failure);
    ``record.seconds`` counts from this call, and the output is recorded as published
    (:func:`_note_output`).

    Args:
        running: where ``work`` kept what it ran (this thread's entry is removed at the end).
    """
    turn = time.perf_counter()
    before = file_identity(record.output)
    try:
        stats, stop_signal = work()
        _finished(record, stats, stop_signal)
        if stats.first_written is not None:
            record.first_frame_ms = round((stats.first_written - turn) * 1e3, 2)
    except Interrupted as exc:
        record.status, record.exit_code = "interrupted", exc.exit_code
        record.error = "aborted by a signal"
    except StreamconvError as exc:
        record.status, record.exit_code, record.error = "failed", exc.exit_code, str(exc)
    except Exception as exc:  # one input's surprise must not stop the others
        record.status, record.exit_code = "failed", 1
        record.error = f"internal error: {type(exc).__name__}: {exc}"
    finally:
        written = running.frames_here()
        running.remove()
        record.seconds = round(time.perf_counter() - turn, 3)
        if _note_output(record, before) and record.status == "failed":
            record.frames = written  # the frames a failed run kept in its output, as it says
        if record.status == "failed":
            log.warning("%s failed: %s", record.input, record.error)


def _note_output(record: BatchRecord, before: tuple[int, int] | None) -> bool:
    """Record the output's size and mtime (ns) as this run left it: what it published (complete,
    or the frames a failed input kept: a file that changed while it ran is taken for its own),
    or, unchanged, what the record already said (an earlier batch's file, still as it was).
    Returns whether this run left the output there."""
    now = file_identity(record.output)
    if now is None:
        record.bytes = record.output_mtime_ns = None
    elif now != before or record.status in FINISHED:
        record.bytes, record.output_mtime_ns = now
    return now is not None and now != before


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


def _work(device: int, settings: BatchSettings, gate: AheadGate, tasks, results, stop_taking,
          running: Running) -> None:
    """A worker process's thread: run tasks (:func:`take_inputs`) until none is left or the batch
    stops taking, reporting each input's start and end on ``results``."""

    def take() -> Any:
        while not stop_taking.is_set():  # the task is there, or on its way from the batch's feeder
            try:
                return tasks.get(timeout=0.1)
            except queue.Empty:
                continue
        return None

    def run(task: tuple[int, BatchRecord], prefetch: Prefetch | None) -> None:
        index, record = task
        record.status, record.device = "running", device if settings.run.backend == "cuda" else None
        results.put(("running", index, device))
        run_input(record, device, settings, running, prefetch)
        results.put(("ended", index, asdict(record)))

    take_inputs(gate, take, device, settings, stop_taking.is_set, run)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process as soon as ``parent`` (the batch's process, or rather
    its thread that started this one) dies (Linux's PR_SET_PDEATHSIG), and end now if it already
    has: a worker must never publish an output that no manifest will record. What it was writing
    stays as hidden temporary files, which the next batch of those outputs removes."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: worker_process's polling stands in
    if os.getppid() != parent:  # died before the prctl took hold
        os._exit(1)


def worker_process(settings: BatchSettings, devices: list[int], gate_counts, tasks, results,
                   stop_taking, abort, log_level: int, parent: int) -> None:
    """A worker process: one thread per entry of ``devices`` takes ``(index, record)`` tasks while
    :class:`AheadGate` (over ``gate_counts``) says some are pending (or until ``stop_taking``), and
    reports ``("running", index, device)`` and ``("ended", index, record fields)`` on ``results``;
    ``abort`` set aborts the running pipelines, their outputs discarded. The batch's process
    (pid ``parent``) dying kills this one at once (:func:`die_with_parent`; elsewhere than on
    Linux, within 0.1 s): no manifest would record what it finished. Signals are the batch's
    process's to handle: here they are ignored."""
    die_with_parent(parent)
    steady_standard_streams()  # the batch's stderr, inherited: closed, broken or full as it is
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=log_level, format="streamconv: %(message)s", force=True)
    running, gate = Running(), AheadGate(gate_counts)
    threads = [threading.Thread(target=_work,
                                args=(device, settings, gate, tasks, results, stop_taking, running),
                                daemon=True) for device in devices]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        if os.getppid() != parent:  # the portable fallback of die_with_parent
            os._exit(1)
        if abort.wait(0.1):
            running.abort_all(None)
            break
    for thread in threads:
        thread.join()
