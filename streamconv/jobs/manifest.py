"""A batch's manifest: one record per input (status, frames, fps, exit code, output, error), kept
true on disk as the batch runs.

The file is rewritten whole through :func:`streamconv.files.publish.write_atomically` at every
change of status, so a batch killed at any moment leaves a complete manifest of what had happened by
then. ``--resume`` reads it back (:func:`resume_plan`): an input is not run again only if its record
says done (or damaged), for the same input file, unchanged since (size and mtime), under the same
settings (:func:`settings_fingerprint`), and its output is still there at the size recorded; an
output may be replaced without ``--overwrite`` only while it is still exactly what a batch of this
manifest published (size and mtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..errors import InputError, OutputError
from ..files.publish import check_output_path, protected_files, write_atomically

if TYPE_CHECKING:
    from ..chain.filters import FilterStage

MANIFEST_NAME = "streamconv-batch.json"
"""The manifest's name in the output folder (unless ``--manifest`` says otherwise)."""

FINISHED = ("done", "damaged")
"""Statuses whose output is complete (damaged: the input was, and every decodable frame is in
it)."""

STATUSES = ("pending", "running", *FINISHED, "failed", "skipped", "interrupted")


@dataclass
class BatchRecord:
    """What happened to one input of a batch.

    Attributes:
        input, output: the paths.
        status: one of STATUSES; ``skipped``: done by an earlier batch (``--resume``).
        frames, fps, seconds: frames written, their rate, wall time of the run.
        exit_code: what ``streamconv run`` would have returned for this input (None: not run yet).
        error: the error's message for a failed input.
        damage: what was found wrong with a damaged input.
        decoder, device: who decoded it, and on which GPU it ran (None: the CPU backend, or a
            segmented input's segments spread over several GPUs).
        bytes, output_mtime_ns: the output's size and modification time (ns) as published: once
            complete, or the frames a failed input kept; or an earlier batch's output that a
            failed run left as it was (None: no output).
        input_bytes, input_mtime_ns: the input's size and modification time (ns) when it ran.
        settings: :func:`settings_fingerprint` of the batch that ran it.
        first_frame_ms: from the input's turn to its first frame written (opening the input and
            the encoder, the first decode and filter; no CUDA context or kernel build after the
            worker's first input).
        opened_ahead: whether it was opened while the worker's previous input ran.
        resumed: kept from an earlier batch by ``--resume``, not run in this one (skipped, or
            still damaged).
    """

    input: str
    output: str
    status: str = "pending"
    frames: int = 0
    fps: float = 0.0
    seconds: float = 0.0
    exit_code: int | None = None
    error: str | None = None
    damage: list[str] = field(default_factory=list)
    decoder: str = ""
    device: int | None = None
    bytes: int | None = None
    first_frame_ms: float | None = None
    opened_ahead: bool = False
    input_bytes: int | None = None
    input_mtime_ns: int | None = None
    output_mtime_ns: int | None = None
    settings: str = ""
    resumed: bool = False

    def update(self, fields: dict) -> None:
        """Take the fields a worker (a process, a Ray task) reported for this input."""
        for name, value in fields.items():
            setattr(self, name, value)


class Manifest:
    """The records of a batch and the file they are kept in.

    Args:
        path: the manifest file.
        records: one per input, in order.
        protect: files the manifest must never replace: a mapping of role -> path, as for
            :func:`streamconv.files.publish.check_output_path` (the inputs and outputs).
        replace: whether an existing manifest may be replaced (``--resume`` or ``--overwrite``).

    Raises:
        OutputError: the manifest exists and may not be replaced, or cannot be written there.
    """

    def __init__(self, path: Path, records: list[BatchRecord], *, protect: Iterable = (),
                 replace: bool = False, on_error: Callable[[], None] | None = None) -> None:
        self.protect = protected_files(protect)  # expanded once, not at every write
        self.path = check_output_path(path, overwrite=replace, protect=self.protect,
                                      what="manifest")
        self.records = records
        self.error: OutputError | None = None  # the first write that failed
        self._on_error = on_error
        self._lock = threading.Lock()
        self._replace = replace
        self._swept = False  # the temporary files killed batches left: removed at the first write
        self.started = time.time()

    def write(self) -> None:
        """Rewrite the file whole with the records as they are now (thread-safe). A write that
        fails (its folder removed, a full disk) raises nothing here, in whichever thread wrote:
        the first such error is kept in ``error`` and ``on_error`` called, so that the batch
        starts no input it could not record, and reports the error as it ends."""
        with self._lock:
            document = {"format": "streamconv-batch", "version": 1, "started": self.started,
                        "updated": time.time(), "counts": self.counts(),
                        "inputs": [asdict(record) for record in self.records]}
            try:
                write_atomically(self.path, json.dumps(document, indent=1) + "\n",
                                 overwrite=self._replace,
                                 protect=self.protect, what="manifest", sweep=not self._swept)
            except OutputError as exc:
                if self.error is None:
                    self.error = exc
                    if self._on_error is not None:
                        self._on_error()
                return
            self._replace = self._swept = True  # ours from now on

    def counts(self) -> dict[str, int]:
        """How many records have each status."""
        return status_counts(self.records)


def frames_written(records) -> int:
    """The frames ``records`` (BatchRecords) wrote in this batch: of inputs finished, and those
    a failed input kept in its output; not of those an earlier batch finished (``--resume``)."""
    return sum(r.frames for r in records if r.status != "skipped" and not r.resumed)


def status_counts(records) -> dict[str, int]:
    """How many of ``records`` (BatchRecords) have each status, every status named."""
    return {status: sum(r.status == status for r in records) for status in STATUSES}


def earlier_records(path: Path) -> dict[str, dict]:
    """The records of an earlier manifest at ``path``, by output path (empty if there is none).

    Raises:
        OutputError: the file is not a streamconv batch manifest.
    """
    if not path.exists():
        return {}
    if not looks_like_manifest(path):
        raise OutputError(f"cannot resume from {path}: not a streamconv batch manifest")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        records = document["inputs"] if document.get("format") == "streamconv-batch" else None
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise OutputError(f"cannot resume from {path}: not a readable streamconv batch manifest "
                          f"({exc})") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise OutputError(f"cannot resume from {path}: not a streamconv batch manifest")
    return {str(record.get("output", "")): record for record in records}


def looks_like_manifest(path: str | Path) -> bool:
    """Whether the file at ``path`` begins as a batch manifest does: a JSON object naming the
    ``streamconv-batch`` format in its first 4 KiB (only those are read: a video named as the
    manifest is not read whole). False if it cannot be read."""
    try:  # non-blocking: a FIFO's opening would wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as file:
        try:
            head = file.read(4096) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            return False
    return head.lstrip().startswith(b"{") and b'"streamconv-batch"' in head


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """(size, mtime_ns) of the regular file at ``path`` (links followed), or None if there is
    none."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None


def not_a_file(name: str | Path, *, now: bool = False) -> InputError:
    """The error for an input that is there but is no regular file (``now``: no longer, as it was
    when the batch found it): FFmpeg's opening of a FIFO waits for a writer, for ever."""
    return InputError(f"input {name} is {'no longer' if now else 'not'} a regular file (a FIFO, "
                      "socket, "
                      f"device or folder is there); a batch reads files")


def settings_fingerprint(filters: Sequence[FilterStage], options: dict[str, Any]) -> str:
    """A digest (16 hex digits) of what decides an output's pictures and container apart from its
    input and path (which carries the extension): every stage's name, parameters, taps and layer
    weights, and ``options`` (border, colour path, backend, kernel, the encoder's options)."""
    digest = hashlib.sha256()
    for stage in filters:
        params = sorted((key, repr(value)) for key, value in stage.params.items() if key != "taps")
        digest.update(repr((stage.name, params, stage.combine)).encode())
        arrays = list(stage.taps) + ([stage.layer.weights] if stage.layer is not None else [])
        if stage.layer is not None:
            digest.update(repr((stage.layer.relu, stage.layer.pool)).encode())
        for array in arrays:  # the values themselves: a file's taps may change under one name
            digest.update(repr((array.dtype.str, array.shape)).encode() + array.tobytes())
    digest.update(json.dumps(options, sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:16]


def is_complete(record: dict, source: str | Path, fingerprint: str) -> bool:
    """Whether an earlier ``record`` (a dict from :func:`earlier_records`) stands for this run of
    ``source``: finished, from the same input file (its resolved path, size and mtime as when it
    ran), under the same settings, its output still there at the size recorded."""
    if record.get("status") not in (*FINISHED, "skipped") or record.get("bytes") is None:
        return False
    if record.get("input") != str(source) or record.get("settings") != fingerprint:
        return False
    if file_identity(source) != (record.get("input_bytes"), record.get("input_mtime_ns")):
        return False
    output = file_identity(str(record.get("output", "")))
    return output is not None and output[0] == record["bytes"]


def is_ours(record: dict) -> bool:
    """Whether the file at an earlier ``record``'s output is still exactly what that batch
    published (size and mtime as recorded), so that running its input again may replace it."""
    published = (record.get("bytes"), record.get("output_mtime_ns"))
    return None not in published and file_identity(str(record.get("output", ""))) == published


def resume_plan(earlier: dict[str, dict], outputs: Iterable[tuple[Path, Path]],
                fingerprint: str) -> tuple[dict[str, dict], set[Path]]:
    """What ``--resume`` may trust of an earlier manifest (``earlier``, by output path) for this
    batch's (source, output) pairs: the earlier records of outputs that are complete (skipped
    now), and the outputs a batch of this manifest published, still as it left them (each may
    be replaced when its input runs again; any other file at an output path is refused)."""
    complete, ours = {}, set()
    for source, output in outputs:
        record = earlier.get(str(output))
        if record is None:
            continue
        if is_complete(record, source, fingerprint):
            complete[str(output)] = record
        elif is_ours(record):
            ours.add(output)
    return complete, ours
