"""A batch's manifest: one record per input (status, frames, fps, exit code, output, error), kept
true on disk as the batch runs.

The file is rewritten whole through :func:`streamconv.publish.write_atomically` at every change of
status, so a batch killed at any moment leaves a complete manifest of what had happened by then.
``--resume`` reads it back: an input whose record says done (or damaged) and whose output is
still there, with the size recorded, is not run again.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from .errors import OutputError
from .publish import check_output_path, write_atomically

MANIFEST_NAME = "streamconv-batch.json"
"""The manifest's name in the output folder (unless ``--manifest`` says otherwise)."""

FINISHED = ("done", "damaged")
"""Statuses whose output is complete (damaged: the input was, and every decodable frame is in it)."""

STATUSES = ("pending", "running", *FINISHED, "failed", "skipped", "interrupted")


@dataclass
class BatchRecord:
    """What happened to one input of a batch.

    Attributes:
        input, output: the paths.
        status: one of STATUSES; ``skipped``: complete from an earlier batch (``--resume``).
        frames, fps, seconds: frames written, their rate, wall time of the run.
        exit_code: what ``streamconv run`` would have returned for this input (None: not run yet).
        error: the error's message for a failed input.
        damage: what was found wrong with a damaged input.
        decoder, device: who decoded it, and on which GPU it ran (None: the CPU backend, or a
            segmented input's segments spread over several GPUs).
        bytes: the output's size once complete.
        first_frame_ms: from the input's turn to its first frame written (opening the input and
            the encoder, the first decode and filter; no CUDA context or kernel build after the
            worker's first input).
        opened_ahead: whether it was opened while the worker's previous input ran.
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

    def update(self, fields: dict) -> None:
        """Take the fields a worker (a process, a Ray task) reported for this input."""
        for name, value in fields.items():
            setattr(self, name, value)


class Manifest:
    """The records of a batch and the file they are kept in.

    Args:
        path: the manifest file.
        records: one per input, in order.
        protect: files the manifest must never replace (the inputs).
        replace: whether an existing manifest may be replaced (``--resume`` or ``--overwrite``).

    Raises:
        OutputError: the manifest exists and may not be replaced, or cannot be written there.
    """

    def __init__(self, path: Path, records: list[BatchRecord], *, protect: Iterable = (),
                 replace: bool = False) -> None:
        self.protect = tuple(str(p) for p in protect)
        self.path = check_output_path(path, overwrite=replace, protect=self.protect, what="manifest")
        self.records = records
        self._lock = threading.Lock()
        self._replace = replace
        self.started = time.time()

    def write(self) -> None:
        """Rewrite the file whole with the records as they are now (thread-safe)."""
        with self._lock:
            document = {"format": "streamconv-batch", "version": 1, "started": self.started,
                        "updated": time.time(), "counts": self.counts(),
                        "inputs": [asdict(record) for record in self.records]}
            write_atomically(self.path, json.dumps(document, indent=1) + "\n", overwrite=self._replace,
                             protect=self.protect, what="manifest")
            self._replace = True  # ours from now on

    def counts(self) -> dict[str, int]:
        """How many records have each status."""
        return status_counts(self.records)


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
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        records = document["inputs"] if document.get("format") == "streamconv-batch" else None
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise OutputError(f"cannot resume from {path}: not a readable streamconv batch manifest ({exc})") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise OutputError(f"cannot resume from {path}: not a streamconv batch manifest")
    return {str(record.get("output", "")): record for record in records}


def is_complete(record: dict) -> bool:
    """Whether an earlier record's output is complete and still there, the size it was recorded with."""
    output = Path(str(record.get("output", "")))
    return (record.get("status") in (*FINISHED, "skipped") and record.get("bytes") is not None
            and output.is_file() and output.stat().st_size == record["bytes"])
