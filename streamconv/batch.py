"""Many inputs in one process: each through its own Pipeline, ``jobs`` at a time on each GPU.

The workers are threads of one process, so the CUDA context of each GPU, the compiled kernels
and the imports are paid for once; every input keeps its own ring, CUDA streams, decoder and
stats. One input failing never stops the others; the manifest (:mod:`streamconv.manifest`) says
what happened to each. Signals (the main thread's): a first SIGINT/SIGTERM starts no new input
and lets the running ones finish; a second aborts them, their outputs discarded.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .backends import resolve_backend
from .batch_inputs import BatchInput, find_inputs, plan_outputs, refuse_existing
from .borders import DEFAULT_BORDER
from .cuda_device import cuda_device_count
from .errors import EXIT_DAMAGED_INPUT, EXIT_SOME_FAILED, FilterSpecError, Interrupted, StreamconvError
from .filters import FilterStage, parse_chain
from .interrupts import stop_on_signals
from .manifest import FINISHED, MANIFEST_NAME, BatchRecord, Manifest, earlier_records, is_complete
from .pipeline import Pipeline

log = logging.getLogger(__name__)


def default_jobs(backend: str) -> int:
    """Inputs at once per GPU (or on the CPU backend): enough that the codecs keep the cores busy."""
    cores = os.cpu_count() or 2
    return max(2, cores // 4) if backend == "cuda" else max(1, cores // 4)


@dataclass
class BatchResult:
    """What a batch did: one record per input (as in the manifest), and its exit code: 0 all done
    (or skipped), 13 some damaged, EXIT_SOME_FAILED some failed, 128 + signal if interrupted."""

    records: list[BatchRecord]
    exit_code: int
    manifest: Path


class Batch:
    """A batch of inputs filtered into an output folder.

    Args:
        inputs: files, globs (expanded here) and folders (their video files).
        filters: the chain, as for Pipeline.
        outdir: the output folder (made if missing); each output is OUTDIR/<input's name>.
        jobs: inputs at once per device (None: :func:`default_jobs`).
        devices: GPUs to spread the inputs over (None: ``[0]``; "all": every one).
        backend, border, kernel, ring, decoder, colour: as for Pipeline.
        sink_options: FileSink options (codec, pix_fmt, crf, bitrate, preset).
        manifest: the manifest file (None: OUTDIR/streamconv-batch.json).
        resume: skip inputs an earlier batch finished (per its manifest, outputs still there).
        overwrite: replace existing outputs (and an existing manifest).
        recursive: folders' subfolders too (outputs keep their relative paths), ``**`` in globs.
        ext: the outputs' extension (None: the input's).
        progress: draw a status line on stderr when it is a terminal.

    Raises (before any work):
        InputError: an input names nothing. OutputError: an output would be an input, two inputs
        one output, or an output exists. FilterSpecError, BackendUnavailableError: as for Pipeline.
    """

    def __init__(self, inputs: Sequence[str], filters: Sequence[str | FilterStage], outdir: str | Path, *,
                 jobs: int | None = None, devices: Sequence[int] | str | None = None, backend: str = "auto",
                 border: str = DEFAULT_BORDER, kernel: str = "auto", ring: int = 3, decoder: str = "auto",
                 colour: str = "auto", sink_options: dict[str, Any] | None = None, manifest: str | Path | None = None,
                 resume: bool = False, overwrite: bool = False, recursive: bool = False, ext: str | None = None,
                 progress: bool = False) -> None:
        self.filters = parse_chain(filters)
        self.devices = _devices(devices)
        self.backend = resolve_backend(backend, device=self.devices[0])
        if self.backend == "cpu":
            self.devices = [0]
        for device in self.devices[1:]:
            resolve_backend("cuda", device=device)  # each GPU asked for must be there
        if jobs is not None and jobs < 1:
            raise FilterSpecError(f"jobs must be >= 1, got {jobs}")
        self.jobs = jobs or default_jobs(self.backend)
        self.options = {"border": border, "kernel": kernel, "ring": ring, "decoder": decoder, "colour": colour}
        self.sink_options = {k: v for k, v in (sink_options or {}).items() if v is not None}
        self.overwrite, self.progress = overwrite, progress
        outdir = Path(outdir)
        items = plan_outputs(find_inputs(inputs, recursive=recursive), outdir, ext=ext)
        manifest_path = Path(manifest) if manifest is not None else outdir / MANIFEST_NAME
        earlier = earlier_records(manifest_path) if resume else {}
        complete = {output: record for output, record in earlier.items() if is_complete(record)}
        # What an earlier batch wrote is its own to replace (a failed input's partial output).
        self._ours = set(earlier)
        refuse_existing(items, overwrite=overwrite, done={Path(p) for p in earlier})
        outdir.mkdir(parents=True, exist_ok=True)
        records = [_record(item, complete.get(str(item.output))) for item in items]
        protect = [str(item.source) for item in items] + [str(item.output) for item in items]
        self.manifest = Manifest(manifest_path, records, protect=protect, replace=resume or overwrite)
        self._pending: queue.Queue[BatchRecord] = queue.Queue()
        self._running: dict[int, Pipeline] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stop_signal: int | None = None

    def run(self) -> BatchResult:
        """Filter every input not yet complete; returns when all have ended (or a signal stopped them)."""
        for record in self.manifest.records:
            if record.status == "pending":
                self._pending.put(record)
        self.manifest.write()
        workers = [threading.Thread(target=self._work, args=(device,), name=f"streamconv-batch-{device}-{n}",
                                    daemon=True)
                   for device in self.devices for n in range(self.jobs)]
        started = time.perf_counter()
        with stop_on_signals(self._stop_taking):
            for worker in workers:
                worker.start()
            try:
                self._wait(workers, started)
            except Interrupted:
                self._abort_running()
                for worker in workers:
                    worker.join()
                self.manifest.write()
                raise
        self.manifest.write()
        return BatchResult(self.manifest.records, self._exit_code(), self.manifest.path)

    def _wait(self, workers: list[threading.Thread], started: float) -> None:
        """Wait for the workers, drawing the status line (the main thread stays free for signals)."""
        draw = self.progress and sys.stderr.isatty()
        for worker in workers:
            while worker.is_alive():
                worker.join(0.25)
                if draw:
                    self._draw(started)
        if draw:
            sys.stderr.write("\r\033[K")

    def _draw(self, started: float) -> None:
        counts = self.manifest.counts()
        total = len(self.manifest.records)
        ended = total - counts["pending"] - counts["running"]
        with self._lock:
            live = sum(p.stats.frames for p in self._running.values() if p.stats is not None)
        frames = live + sum(r.frames for r in self.manifest.records if r.status in FINISHED)
        elapsed = time.perf_counter() - started
        eta = (elapsed / ended * (total - ended)) if ended else None
        sys.stderr.write(f"\rbatch: {ended}/{total} ended, {counts['failed']} failed, {counts['running']} running, "
                         f"{frames / max(elapsed, 1e-9):.1f} fps" + (f", ETA {eta:.0f} s" if eta is not None else ""))
        sys.stderr.flush()

    def _stop_taking(self, signum: int) -> None:
        log.warning("%s: no new inputs; the running ones finish (a second signal aborts them)",
                    signal.Signals(signum).name)
        self._stop_signal = signum
        self._stopping.set()

    def _abort_running(self) -> None:
        with self._lock:
            running = list(self._running.values())
        for pipeline in running:
            pipeline.abort(self._stop_signal)

    def _work(self, device: int) -> None:
        """A worker: take pending inputs one by one until none is left or the batch stops."""
        while not self._stopping.is_set():
            try:
                record = self._pending.get_nowait()
            except queue.Empty:
                return
            self._run_one(record, device)

    def _run_one(self, record: BatchRecord, device: int) -> None:
        """Run one input through its own Pipeline and record how it ended."""
        record.status, record.device = "running", device if self.backend == "cuda" else None
        self.manifest.write()
        started = time.perf_counter()
        key = threading.get_ident()
        try:
            Path(record.output).parent.mkdir(parents=True, exist_ok=True)
            pipeline = Pipeline(record.input, self.filters, record.output, backend=self.backend, device=device,
                                sink_options={**self.sink_options,
                                              "overwrite": self.overwrite or record.output in self._ours},
                                **self.options)
            with self._lock:
                self._running[key] = pipeline
            stats = pipeline.run()
            _finished(record, stats, pipeline.stop_signal)
        except Interrupted as exc:
            record.status, record.exit_code, record.error = "interrupted", exc.exit_code, "aborted by a signal"
        except StreamconvError as exc:
            record.status, record.exit_code, record.error = "failed", exc.exit_code, str(exc)
        except Exception as exc:  # one input's surprise must not stop the others
            record.status, record.exit_code, record.error = "failed", 1, f"internal error: {type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                self._running.pop(key, None)
            record.seconds = round(time.perf_counter() - started, 3)
            if record.status == "failed":
                log.warning("%s failed: %s", record.input, record.error)
            self.manifest.write()

    def _exit_code(self) -> int:
        counts = self.manifest.counts()
        if self._stop_signal is not None:
            return 128 + self._stop_signal
        if counts["failed"] or counts["interrupted"]:
            return EXIT_SOME_FAILED
        return EXIT_DAMAGED_INPUT if counts["damaged"] else 0


def run_batch(inputs: Sequence[str], filters: Sequence[str | FilterStage], outdir: str | Path,
              **options) -> BatchResult:
    """Filter many inputs into ``outdir`` (see :class:`Batch` for the options) and return the
    result; the manifest is written as the batch goes."""
    return Batch(inputs, filters, outdir, **options).run()


def _finished(record: BatchRecord, stats, stop_signal: int | None) -> None:
    """Fill a record from a finished run's stats; a run stopped early is not complete."""
    record.frames, record.decoder = stats.frames, stats.decoder
    record.fps = round(stats.fps, 2)
    record.damage = list(stats.damage)
    if stop_signal is not None:
        record.status, record.exit_code = "interrupted", 128 + stop_signal
        return
    record.status = "damaged" if stats.damage else "done"
    record.exit_code = EXIT_DAMAGED_INPUT if stats.damage else 0
    record.bytes = Path(record.output).stat().st_size


def _record(item: BatchInput, earlier: dict | None) -> BatchRecord:
    record = BatchRecord(str(item.source), str(item.output))
    if earlier is not None:  # complete from an earlier batch: skipped, its figures kept
        record.status = "skipped"
        for name in ("frames", "fps", "seconds", "decoder", "device", "bytes", "damage"):
            setattr(record, name, earlier.get(name, getattr(record, name)))
        record.exit_code = earlier.get("exit_code", 0)
    return record


def _devices(devices: Sequence[int] | str | None) -> list[int]:
    """The GPU numbers: None -> [0]; "all" -> every GPU present; a list as given (each checked later)."""
    if devices is None:
        return [0]
    if devices == "all":
        return list(range(max(1, cuda_device_count())))
    chosen = [int(d) for d in devices]
    if not chosen or any(d < 0 for d in chosen) or len(set(chosen)) != len(chosen):
        raise FilterSpecError(f"devices must be distinct GPU numbers >= 0, got {devices!r}")
    return chosen
