"""A batch across machines on Ray (the ``ray`` extra): each input one Ray task, on whichever node
Ray places it, asking for a share of a GPU (``1 / jobs``) on the CUDA backend.

Inputs and outputs must be on a path every node sees (a shared file system) or be URLs. Only
the batch's own process writes the manifest, from the tasks' results, so an input is counted
once however often it ran. A task whose worker dies is retried (``max_retries``) elsewhere; the
lost attempt's output was never published (outputs are renamed into place only when complete).
A first signal cancels the tasks not yet started (they stay pending for ``--resume``), a second
cancels the running ones too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, Protocol

from ..worker import BatchSettings, Running, run_input
from ...errors import BackendUnavailableError, Interrupted
from ...interrupts import SignalGuard
from ..manifest import BatchRecord, Manifest, file_identity
from ...files.publish import claim_path

log = logging.getLogger(__name__)

RAY_EXTRA = "pip install 'streamconv[ray]'"
MAX_RETRIES = 3
"""Attempts after the first when a task's worker or node is lost."""
PROBE_TIMEOUT = 10.0
"""Seconds to wait for a cluster's address to answer before Ray is asked to join it."""
LOST_AFTER = 20.0
"""Seconds the cluster's head may go unanswering during a batch before the batch gives up on it
(Ray itself would wait a minute, then end the process with its own message)."""
WATCH_EVERY = 2.0
"""Seconds between looks at the cluster's head while no task ends."""


def ray_module():
    """Ray, or BackendUnavailableError naming the extra."""
    try:
        import ray  # optional (the ray extra)
    except ImportError:
        raise BackendUnavailableError(f"--ray needs Ray ({RAY_EXTRA})") from None
    return ray


def connect(ray, address: str | None) -> None:
    """Join the Ray cluster at ``address`` (None: RAY_ADDRESS's, else one ``ray start`` ran
    here, else a new local one), unless this process has joined one already.

    Raises:
        BackendUnavailableError: the address is not HOST:PORT, or nothing answers there (Ray
        itself would retry without end), or Ray refuses it.
    """
    if ray.is_initialized():
        return
    target = address or os.environ.get("RAY_ADDRESS") or None
    if target not in (None, "auto", "local"):
        _probe(target)
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ValueError, ConnectionError) as exc:
        raise BackendUnavailableError(f"--ray: cannot join the Ray cluster at {target}: "
                                      f"{exc}") from None


def _probe(address: str) -> None:
    """Raise BackendUnavailableError unless something answers at ``address`` (HOST:PORT, or
    ray://HOST:PORT for Ray Client) within PROBE_TIMEOUT seconds."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise BackendUnavailableError(f"--ray: the cluster's address {address!r} is not HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT).close()
    except (OSError, OverflowError) as exc:
        raise BackendUnavailableError(f"--ray: no Ray cluster answers at {address} "
                                      f"({getattr(exc, 'strerror', None) or exc})") from None


def run_input_task(record: dict, settings: BatchSettings) -> dict:
    """The Ray task: one input through its own Pipeline on the node it landed on; the record's
    fields."""
    _outlive_cancels()
    ray = ray_module()
    gpus = ray.get_gpu_ids() if settings.run.backend == "cuda" else []
    batch_record = BatchRecord(**record)
    batch_record.status = "running"
    # Ray makes the GPU share it granted the task's only visible device: number 0 here.
    batch_record.device = int(gpus[0]) if gpus else None
    # The input's own run must not take a cancel for its first signal either (it would stop the
    # run and publish a short output): a deferred guard is the one its pipeline finds.
    guard = SignalGuard()
    guard.deferred = True
    task_id = ray.get_runtime_context().get_task_id()
    with guard, _attempt(batch_record.output, task_id, settings):
        run_input(batch_record, 0, settings, Running())
    return asdict(batch_record)


def _outlive_cancels() -> None:
    """Let no Ray cancel cut a running task of this worker short, from here on.

    Ray cancels a running task by a simulated SIGINT in the worker (``interrupt_main``) at any
    moment until the task's result is stored: the batch's first signal, which cancels the tasks
    not started, would else also stop a running input, or land after its output was published
    (its result lost, or the worker crashed). A task cancelled before it got here has started
    nothing and ends as cancelled. The batch's second signal force-cancels: the worker is killed.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _cancel_received)  # a Python handler: not inherited by exec


def _cancel_received(_signum: int, _frame) -> None:
    """SIGINT in a Ray worker once it ran a task of ours: nothing to do (see _outlive_cancels)."""


@contextmanager
def _attempt(output: str, task_id: str, settings: BatchSettings):
    """One attempt of an input's task, marked by a claim file beside ``output`` named after the
    task (Ray keeps its id across retries) from the first attempt's start until an attempt ends.
    A retry that finds the claim and an output newer than it lets that output be replaced: a
    lost attempt published it before its worker died (else the retry would fail on it)."""
    claim = claim_path(output, hashlib.sha256(task_id.encode()).hexdigest()[:8])
    claimed, published = file_identity(claim), file_identity(output)
    if claimed is not None and published is not None and published[1] >= claimed[1]:
        settings.ours.add(output)
    try:
        claim.parent.mkdir(parents=True, exist_ok=True)
        # an earlier one's time kept
        os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError:
        pass  # the input's own run meets what is wrong with the folder
    try:
        yield
    finally:
        claim.unlink(missing_ok=True)


class BatchOnRay(Protocol):
    """What running on Ray reads of a :class:`streamconv.jobs.batch.Batch` (which imports this
    module, so it is named here by what it offers)."""

    jobs: int
    backend: str
    manifest: Manifest
    settings: BatchSettings

    @property
    def stopping(self) -> bool: ...


def run_on_ray(batch: BatchOnRay, address: str | None) -> None:
    """Run ``batch``'s pending inputs as Ray tasks on the cluster at ``address`` (None: the one
    in RAY_ADDRESS, or a new local one), updating its manifest as results come in."""
    ray = ray_module()
    connect(ray, address)
    share = 1.0 / batch.jobs if batch.backend == "cuda" else 0
    task = ray.remote(run_input_task).options(num_gpus=share, num_cpus=1, max_retries=MAX_RETRIES,
                                              retry_exceptions=False)
    waiting: dict[Any, int] = {}
    for index, record in enumerate(batch.manifest.records):
        if record.status == "pending":
            waiting[task.remote(asdict(record), batch.settings)] = index
    try:
        _collect(ray, batch, waiting)
    except Interrupted:
        for ref in waiting:
            ray.cancel(ref, force=True)
        _collect(ray, batch, waiting, cancelled=True)
        raise


def _collect(ray, batch: BatchOnRay, waiting: dict, *, cancelled: bool = False) -> None:
    """Record each task's result as it comes; after the first signal, cancel the ones not started.

    Raises:
        BackendUnavailableError: the cluster's head stopped answering (LOST_AFTER seconds); the
            inputs not finished stay pending.
    """
    stopped = False
    watch = HeadWatch(ray)
    while waiting:
        if not cancelled:
            watch.check(f"{len(waiting)} input(s) not finished stay pending (--resume runs them)")
        if batch.stopping and not stopped and not cancelled:
            stopped = True
            for ref in list(waiting):
                ray.cancel(ref)  # a task not yet started is dropped; a running one finishes
        done, _ = ray.wait(list(waiting), num_returns=1, timeout=0.25)
        for ref in done:
            # Let go of the task only once its result is recorded: a second signal while it is
            # fetched would leave its published output unrecorded (the cancelled pass records it).
            _record_result(ray, batch.manifest.records[waiting[ref]], ref, stopped or cancelled)
            del waiting[ref]
            batch.manifest.write()


class HeadWatch:
    """Whether the cluster's head (its GCS address) still takes connections, looked at every
    WATCH_EVERY seconds: call :meth:`check` while waiting for tasks."""

    def __init__(self, ray) -> None:
        self.address = ray.get_runtime_context().gcs_address
        self._next = time.monotonic() + WATCH_EVERY
        self._silent_since: float | None = None

    def check(self, left: str) -> None:
        """Raise BackendUnavailableError once the head has not answered for LOST_AFTER seconds;
        its message ends with ``left``, what becomes of the work not finished."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + WATCH_EVERY
        host, _, port = self.address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=WATCH_EVERY).close()
            self._silent_since = None
            return
        except (OSError, ValueError):
            self._silent_since = self._silent_since or now
        if now - self._silent_since >= LOST_AFTER:
            raise BackendUnavailableError(
                f"--ray: the Ray cluster at {self.address} stopped answering; {left}")


def _record_result(ray, record: BatchRecord, ref, cancelled: bool) -> None:
    try:
        record.update(ray.get(ref))
    except ray.exceptions.TaskCancelledError:
        record.status = "interrupted" if record.status == "running" else "pending"
    except (ray.exceptions.RayError, OSError) as exc:
        if cancelled:
            record.status = "interrupted"
            return
        record.status, record.exit_code = "failed", 1
        record.error = (f"the Ray task failed after {MAX_RETRIES} retries: "
                        f"{type(exc).__name__}: {exc}")
