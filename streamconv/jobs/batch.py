"""Many inputs in one process: each through its own Pipeline, ``jobs`` at a time on each GPU.

The workers are threads of one process, so the CUDA context of each GPU, the compiled kernels
and the imports are paid for once; every input keeps its own ring, CUDA streams, decoder and
stats. Past what one process's threads can drive, the inputs are shared among worker processes
(:mod:`streamconv.jobs.worker`), each with its threads; only this process writes the manifest.
One input failing never stops the others; the manifest (:mod:`streamconv.jobs.manifest`) says
what happened to each. Signals (the main thread's): a first SIGINT/SIGTERM starts no new input
and lets the running ones finish; a second aborts them, their outputs discarded.

With ``segments`` each input is instead cut at keyframes and filtered in segments by
:func:`streamconv.jobs.segments.run_segments`, the inputs one after another (see :class:`Batch`).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ..backends import resolve_backend
from .inputs import (BatchInput, check_arguments, check_outdir, find_inputs, input_record,
                     make_folders, plan_outputs, ray_refusal, refuse_existing, remove_folders,
                     remove_stale_partials, segments_refusal)
from ..frames.borders import DEFAULT_BORDER
from ..gpu.device import gpu_numbers
from .ray.batch import run_on_ray
from .batch_workers import BatchWorkers
from .batch_workers import run_segmented_input  # noqa: F401 (its home before the split)
from .worker import BatchSettings, Running
from ..errors import EXIT_DAMAGED_INPUT, EXIT_SOME_FAILED, OutputError, SettingsError
from ..frames.checks import as_count
from ..chain.filters import FilterStage, parse_chain
from ..interrupts import stop_on_signals
from ..io.ffmpeg.encoder_check import check_encoders_ahead
from .manifest import (BatchRecord, Manifest, earlier_records, file_identity,
                       looks_like_manifest, resume_plan, settings_fingerprint)
from .manifest_lock import only_batch
from ..files.publish import check_name_lengths
from ..run.settings import EncodeSettings, RunSettings, settings_from, sink_options_with

log = logging.getLogger(__name__)


def default_jobs(backend: str) -> int:
    """Inputs at once per GPU (or on the CPU backend): enough that the codecs keep the cores
    busy."""
    cores = os.cpu_count() or 2
    return max(2, cores // 4) if backend == "cuda" else max(1, cores // 4)


@dataclass
class BatchResult:
    """What a batch did: one record per input (as in the manifest), and its exit code: 0 all done
    (or skipped), 13 some damaged, EXIT_SOME_FAILED some failed, 128 + signal if interrupted."""

    records: list[BatchRecord]
    exit_code: int
    manifest: Path


class Batch(BatchWorkers):
    """A batch of inputs filtered into an output folder.

    Args:
        inputs: files, globs (expanded here) and folders (their video files).
        filters: the chain, as for Pipeline.
        outdir: the output folder (made if missing); each output is OUTDIR/<input's name>.
        jobs: inputs at once per device (None: :func:`default_jobs`).
        processes: processes the inputs are shared among (None:
            :func:`streamconv.jobs.worker.default_processes`; 1: threads of this process only).
        devices: GPUs to spread the inputs over (None: ``[0]``; "all": every one).
        settings: how each input runs (:class:`streamconv.run.settings.RunSettings`; its device is
            the one each input runs on); or give backend, border, kernel, ring, decoder, colour
            and depth as keywords, as for Pipeline (not both).
        encode: the encoder's settings (:class:`streamconv.run.settings.EncodeSettings`); or
            give them in ``sink_options`` (codec, pix_fmt, crf, bitrate, preset; not both).
        sink_options: every output's FileSink options.
        manifest: the manifest file (None: OUTDIR/streamconv-batch.json).
        resume: skip inputs an earlier batch of this manifest finished: the same input file,
            unchanged, under the same settings, its output still there at the size recorded
            (:func:`streamconv.jobs.manifest.resume_plan`); the others run again, replacing an
            output that batch published only while it is still exactly as published. A damaged input
            skipped keeps its record (damaged, exit code 13); a done one is recorded skipped.
        overwrite: replace existing outputs (and an existing manifest).
        recursive: folders' subfolders too (outputs keep their relative paths), ``**`` in globs.
            A folder scan passes over hidden files and folders, OUTDIR's tree, the manifest and,
            resuming, the outputs the manifest names (:func:`find_inputs`).
        ext: the outputs' extension (None: the input's); one FFmpeg has a muxer for.
        progress: draw a status line on stderr when it is a terminal.
        ray: run each input as a task on a Ray cluster (:mod:`streamconv.jobs.ray.batch`): True
            for the one in RAY_ADDRESS or a new local one, or the cluster's address; None: this
            host only.
            Not with ``devices`` or ``processes``: the cluster places each task.
        open_ahead: each worker opens its next input while the current one runs (see
            :class:`streamconv.jobs.worker.Prefetch`); False: one at a time.
        segments: filter each input in this many segments (None: whole), cut at its keyframes
            and joined into its output (:func:`streamconv.jobs.segments.run_segments`). The inputs
            then run one after another, each one's segments at once over ``devices`` (``jobs``
            given: at most ``jobs`` times the devices), in threads of this process: the segments
            are the parallel work, so a long input is not left to one slot while the others'
            slots idle, and one input's output is whole before the next starts. Every input
            is a regular file (:func:`find_inputs`), so it can be sought. Not with ``ray``,
            ``processes`` > 1 (see :func:`streamconv.jobs.inputs.segments_refusal`); on NVDEC
            with ``decoder="nvdec"``.

    Raises (before any work, OUTDIR made only once every check passed):
        InputError: an input names nothing. OutputError: an output would be an input, two inputs
        one output, an output exists, ``ext`` has no muxer, OUTDIR is (under) a file, the
        manifest cannot be written, or the encoder settings fit no output
        (:func:`streamconv.io.ffmpeg.encoder_check.check_encoders_ahead`). SettingsError,
        BackendUnavailableError: as for Pipeline;
        SettingsError also for ``segments`` with an option it cannot take, and for ``ray``
        with ``devices`` or ``processes`` (see :func:`streamconv.jobs.inputs.ray_refusal`).
    """

    def __init__(self, inputs: Sequence[str], filters: Sequence[str | FilterStage],
                 outdir: str | Path, *,
                 settings: RunSettings | None = None, encode: EncodeSettings | None = None,
                 jobs: int | None = None, processes: int | None = None,
                 devices: Sequence[int] | str | None = None, backend: str = "auto",
                 border: str = DEFAULT_BORDER, kernel: str = "auto", ring: int = 3,
                 decoder: str = "auto", colour: str = "auto",
                 sink_options: dict[str, Any] | None = None,
                 manifest: str | Path | None = None, resume: bool = False,
                 overwrite: bool = False, recursive: bool = False, ext: str | None = None,
                 progress: bool = False, ray: str | bool | None = None, open_ahead: bool = True,
                 segments: int | None = None, depth: int | None = None) -> None:
        # long: a public class's two dozen keywords, each on the lines of its signature
        outdir, manifest_path, checked = check_arguments(
            outdir, manifest, ring=ring, colour=colour, sink_options=sink_options,
            overwrite=overwrite, resume=resume, recursive=recursive, progress=progress,
            open_ahead=open_ahead)
        refusal = ray_refusal(devices=devices, processes=processes, ray=ray) or \
            (segments_refusal(processes=processes, ray=ray) if segments is not None else None)
        if refusal is not None:
            raise SettingsError(refusal)
        run = settings_from(settings, backend=backend, border=border, kernel=kernel, ring=ring,
                            decoder=decoder, colour=colour, depth=depth)
        sink_options = sink_options_with(encode, checked["sink_options"])
        self.filters = parse_chain(filters)
        run = self._take_devices(run, devices)
        self.jobs = as_count(jobs, "jobs", 1) if jobs is not None else default_jobs(self.backend)
        self.segments = None if segments is None else as_count(segments, "segments", 1)
        self.segment_jobs = None  # segments at once (None: all of an input's)
        if self.segments is not None:
            # one worker: an input's segments are the parallel work
            processes, open_ahead = 1, False
            self.segment_jobs = self.jobs * len(self.devices) if jobs is not None else None
        self.processes = (as_count(processes, "processes", 1) if processes is not None
                          else None)  # None: by threads
        self.progress = progress
        self.ray = ray if ray not in (False, "") else None
        self.settings = BatchSettings(self.filters, run, sink_options, overwrite, set(), open_ahead)
        items, records = self._plan(inputs, outdir, manifest_path, resume=resume,
                                    recursive=recursive, ext=ext)
        protect = {**{f"the input {item.source}": item.source for item in items},
                   **{f"the output of {item.source}": item.output for item in items}}
        made = make_folders(outdir)
        try:
            self.manifest = Manifest(manifest_path, records, protect=protect,
                                     replace=resume or overwrite, on_error=self._manifest_failed)
        except BaseException:
            remove_folders(made)  # refused: leave no folder behind
            raise
        self._pending: queue.Queue[tuple[int, BatchRecord]] = queue.Queue()
        self._running = Running()
        self._stopping = threading.Event()
        self._stop_signal: int | None = None
        self._events = None  # the worker processes' (stop taking, abort) events

    def _take_devices(self, run: RunSettings, devices: Sequence[int] | str | None) -> RunSettings:
        """Set ``devices`` and ``backend`` (resolved; every GPU asked for must be there) and
        return the settings with the first device's backend."""
        self.devices = gpu_numbers(devices)
        run = replace(run, device=self.devices[0]).resolved()
        self.backend = run.backend
        if self.backend == "cpu":
            self.devices = [0]
        for device in self.devices[1:]:
            resolve_backend("cuda", device=device)
        return run

    def _plan(self, inputs: Sequence[str], outdir: Path, manifest_path: Path, *, resume: bool,
              recursive: bool, ext: str | None) -> tuple[list[BatchInput], list[BatchRecord]]:
        """The inputs, their outputs and records, after every check (see the class's Raises); with
        ``resume``, complete ones skipped and outputs still as the manifest's batch published them
        replaceable (``settings.ours``)."""
        check_name_lengths(outdir, "the output folder")
        check_name_lengths(manifest_path, "manifest")
        self._planned = file_identity(manifest_path)  # checked again once the manifest is locked
        earlier = earlier_records(manifest_path) if resume else {}
        # The manifest is never an input, unless the file named is no manifest (an input named by
        # mistake): then it is found as one, and refused as the manifest.
        manifest_skip = ([manifest_path] if not manifest_path.exists()
                         or looks_like_manifest(manifest_path) else [])
        found = find_inputs(inputs, recursive=recursive, outdir=outdir,
                            skip=[*manifest_skip, *(Path(output) for output in earlier)])
        check_outdir(outdir)
        items = plan_outputs(found, outdir, ext=ext, recursive=recursive)
        run, sink_options = self.settings.run, self.settings.sink_options
        check_encoders_ahead([item.output for item in items], sink_options)  # not once per input
        options = {"border": run.border, "colour": run.colour, "kernel": run.kernel}
        if run.depth is not None:  # (at auto, earlier manifests' fingerprints stand)
            options["depth"] = run.depth
        fingerprint = settings_fingerprint(self.filters, {**options, "backend": self.backend,
                                                          "sink": sink_options})
        complete, ours = resume_plan(earlier, [(item.source, item.output) for item in items],
                                     fingerprint)
        refuse_existing(items, overwrite=self.settings.overwrite,
                        exempt={Path(o) for o in complete} | ours, resume=resume)
        self.settings.ours = {str(output) for output in ours}
        return items, [input_record(item, fingerprint, earlier.get(str(item.output)),
                                    complete=str(item.output) in complete,
                                    ours=item.output in ours) for item in items]

    def run(self) -> BatchResult:
        """Filter every input not yet complete; returns when all have ended (or a signal stopped
        them).

        Raises:
            OutputError: another batch of the same manifest is running, or ran since this one
                read it (:func:`streamconv.jobs.manifest_lock.only_batch`); or the manifest could
                not be written (no input was started after that; the running ones finished).
        """
        with only_batch(self.manifest.path, self._planned):
            return self._run()

    def _run(self) -> BatchResult:
        self.manifest.write()
        self._refuse_unrecorded()
        started = time.perf_counter()
        with stop_on_signals(self._stop_taking):
            try:
                if self.ray is not None:
                    run_on_ray(self, None if self.ray is True else str(self.ray))
                elif self._workers()[1] > 1:
                    self._run_processes(started)
                else:
                    self._run_threads(started)
            finally:
                remove_stale_partials([Path(record.output) for record in self.manifest.records]
                                      + [self.manifest.path])
                self.manifest.write()  # the last word, also after a signal
        self._refuse_unrecorded()
        return BatchResult(self.manifest.records, self._exit_code(), self.manifest.path)

    def _manifest_failed(self) -> None:
        """The manifest could not be written: no new input, as after a first signal (the running
        ones finish, their outputs whole); :meth:`_refuse_unrecorded` reports it at the end."""
        self._stopping.set()
        if self._events is not None:
            self._events[0].set()
        log.warning("%s; no new inputs: the batch cannot record them", self.manifest.error)

    def _refuse_unrecorded(self) -> None:
        """Raise OutputError if a write of the manifest failed (it may not say what happened
        since)."""
        if self.manifest.error is not None:
            raise OutputError(f"{self.manifest.error}: the batch stopped taking inputs, and the "
                              f"manifest may not say what the running ones did")

    @property
    def stopping(self) -> bool:
        """True once a first signal said to start no new input."""
        return self._stopping.is_set()

    def _stop_taking(self, signum: int) -> None:
        # The flags before the message: a second signal may come as soon as it is seen.
        self._stop_signal = signum
        self._stopping.set()
        if self._events is not None:
            self._events[0].set()
        log.warning("%s: no new inputs; the running ones finish (a second signal aborts them)",
                    signal.Signals(signum).name)

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
    result; the manifest is written as the batch goes. With more than one process, the workers
    are spawned: a script calling this must do so under ``if __name__ == "__main__":``."""
    return Batch(inputs, filters, outdir, **options).run()
