"""How a batch's pending inputs run (the base of :class:`streamconv.jobs.batch.Batch`): in worker
threads of this process, each input whole (:func:`streamconv.jobs.worker.run_input`) or in
segments (:func:`run_segmented_input`), or in worker processes whose reports this process
applies; the manifest is written as each input starts and ends, the status line drawn meanwhile.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import sys
import threading
import time
from pathlib import Path

from ..errors import Interrupted
from .manifest import BatchRecord, frames_written
from ..run.progress import is_terminal
from .segments import run_segments
from ..run.stats import RunStats
from .worker import (AheadGate, BatchSettings, Prefetch, Running, judge_run, make_output_folder,
                     note_input, run_input, take_inputs, worker_plan, worker_process)


class BatchWorkers:
    """The workers of a :class:`streamconv.jobs.batch.Batch`, which sets what they read (its
    settings, devices, jobs, processes, segments, manifest, and the pending queue, running
    pipelines and stop flags) and picks :meth:`_run_threads` or :meth:`_run_processes`."""

    def _run_threads(self, started: float) -> None:
        """``jobs`` threads per device in this process (in segments: one, the inputs in turn)."""
        for index, record in enumerate(self.manifest.records):
            if record.status == "pending":
                self._pending.put((index, record))
        slots = (list(enumerate(self._workers()[0])) if self.segments is None
                 else [(0, self.devices[0])])
        gate = AheadGate([self._pending.qsize(), len(slots)])
        # Each worker sets its event when it ends: a Thread.join() cut short by a signal would
        # take the thread for ended (CPython releases its state lock), so it is not used here.
        ended = [threading.Event() for _ in slots]
        workers = [threading.Thread(target=self._work, args=(device, gate, event),
                                    name=f"streamconv-batch-{device}-{n}", daemon=True)
                   for (n, device), event in zip(slots, ended)]
        for worker in workers:
            worker.start()
        try:
            self._wait(ended, started)
        except Interrupted:
            self._stopping.set()
            self._running.abort_all(self._stop_signal)
            for event in ended:
                event.wait()
            raise

    def _run_processes(self, started: float) -> None:
        """The inputs shared among worker processes, ``jobs`` threads per device among them."""
        # no fork of a process holding CUDA and threads
        context = multiprocessing.get_context("spawn")
        tasks, results = context.Queue(), context.Queue()
        self._events = stop_taking, abort = context.Event(), context.Event()
        threads, processes = self._workers()
        pending = [(index, record) for index, record in enumerate(self.manifest.records)
                   if record.status == "pending"]
        for task in pending:
            tasks.put(task)
        gate = context.Array("i", [len(pending), len(threads)])  # AheadGate's counts, shared
        workers = [context.Process(target=worker_process, daemon=True,
                                   name=f"streamconv-batch-worker-{n}",
                                   args=(self.settings, threads[n::processes], gate, tasks,
                                         results, stop_taking, abort,
                                         logging.getLogger().getEffectiveLevel(), os.getpid()))
                   for n in range(processes)]
        for worker in workers:
            worker.start()
        try:
            self._collect(workers, results, started)
        except Interrupted:
            stop_taking.set()
            abort.set()
            self._collect(workers, results, started)  # until every worker has reported and ended
            raise

    def _workers(self) -> tuple[list[int], int]:
        """Each worker thread's device, and the worker processes (:func:`worker_plan`)."""
        pending = sum(record.status == "pending" for record in self.manifest.records)
        return worker_plan(self.devices, self.jobs, self.processes, pending)

    def _collect(self, workers: list, results, started: float) -> None:
        """Apply the workers' reports to the records (writing the manifest) until all have
        ended."""
        draw = self.progress and is_terminal(sys.stderr)
        while any(worker.is_alive() for worker in workers) or not results.empty():
            try:
                kind, index, detail = results.get(timeout=0.25)
            except queue.Empty:
                if draw:
                    self._draw(started)
                continue
            record = self.manifest.records[index]
            if kind == "running":
                record.status, record.device = "running", detail if self.backend == "cuda" else None
            else:
                record.update(detail)
            self.manifest.write()
        for record in self.manifest.records:  # a worker that died with an input in hand
            if record.status == "running":
                record.status, record.exit_code = "failed", 1
                record.error = "its worker process ended before the input did"
        if draw:
            sys.stderr.write("\r\033[K")

    def _wait(self, ended: list[threading.Event], started: float) -> None:
        """Wait for the workers to end, drawing the status line (the main thread stays free for
        signals)."""
        draw = self.progress and is_terminal(sys.stderr)
        for event in ended:
            while not event.wait(0.25):
                if draw:
                    self._draw(started)
        if draw:
            sys.stderr.write("\r\033[K")

    def _draw(self, started: float) -> None:
        counts = self.manifest.counts()
        total = len(self.manifest.records)
        ended = total - counts["pending"] - counts["running"]
        frames = self._running.frames() + frames_written(self.manifest.records)
        elapsed = time.perf_counter() - started
        eta = (elapsed / ended * (total - ended)) if ended else None
        sys.stderr.write(f"\rbatch: {ended}/{total} ended, {counts['failed']} failed, "
                         f"{counts['running']} running, {frames / max(elapsed, 1e-9):.1f} fps"
                         + (f", ETA {eta:.0f} s" if eta is not None else ""))
        sys.stderr.flush()

    def _work(self, device: int, gate: AheadGate, ended: threading.Event) -> None:
        """A worker thread: pending inputs one by one (:func:`streamconv.jobs.worker.take_inputs`)
        until none is left or the batch stops, the next opened ahead where the gate allows."""
        try:
            take_inputs(gate, self._pending.get_nowait, device, self.settings,
                        self._stopping.is_set,
                        lambda task, prefetch: self._run_one(task[1], device, prefetch))
        finally:
            ended.set()

    def _run_one(self, record: BatchRecord, device: int, prefetch: Prefetch | None) -> None:
        """Run one input in this thread, the manifest written as it starts and ends."""
        one_gpu = self.segments is None or len(self.devices) == 1  # segments may take several
        record.status = "running"
        record.device = device if self.backend == "cuda" and one_gpu else None
        self.manifest.write()
        try:
            if self.segments is None:
                run_input(record, device, self.settings, self._running, prefetch)
            else:
                run_segmented_input(record, self.settings, self._running, segments=self.segments,
                                    devices=self.devices, jobs=self.segment_jobs)
        finally:
            self.manifest.write()


def run_segmented_input(record: BatchRecord, settings: BatchSettings, running: Running, *,
                        segments: int, devices: list[int], jobs: int | None) -> None:
    """Run one input in ``segments`` segments (:func:`streamconv.jobs.segments.run_segments`:
    cut at keyframes, ``jobs`` at once over ``devices``, joined into its output, which appears
    whole or not at all) and fill ``record`` as :func:`streamconv.jobs.worker.run_input` does.

    The run is kept in ``running``: a batch's second signal aborts every segment (nothing is
    joined); a first lets it finish. The segments decode on NVDEC when the batch's decoder is
    nvdec, else with libavcodec (:func:`streamconv.run.settings.decoder_to_open`).
    """

    def segmented() -> tuple[RunStats, None]:
        note_input(record)
        make_output_folder(Path(record.output).parent)
        stats = run_segments(record.input, settings.filters, record.output, segments=segments,
                             jobs=jobs, devices=devices, settings=settings.run,
                             sink_options=settings.sink_options,
                             overwrite=settings.replaces(record.output), running=running)
        return stats, None  # never stopped early and finished: it ends whole or is aborted

    judge_run(record, segmented, running)
