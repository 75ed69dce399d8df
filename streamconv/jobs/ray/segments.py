"""A segmented run's segments as Ray tasks (``run --segments N --ray``, the ``ray`` extra): each
segment one task, on whichever node Ray places it, writing its part into the parts folder beside the
output (a path every node sees); this process joins the parts (see :mod:`streamconv.jobs.segments`).

A task whose worker or node is lost is retried elsewhere (``max_retries``); parts are published
whole (renamed into place when complete), and a retry replaces a part an earlier attempt may have
completed, so a part is joined only whole and once. Each segment's stats are its task's one
result, so nothing is counted twice. Stopping cancels every task (their workers are killed) and
waits for them to end before the parts folder goes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Sequence

from .batch import MAX_RETRIES, HeadWatch, connect, ray_module
from ...errors import StreamconvError
from ...io.sources.segment import Segment
from ...run.stats import RunStats

log = logging.getLogger(__name__)

CANCEL_WAIT = 30.0
"""Seconds to wait for cancelled tasks' workers to end before the parts folder is removed."""


def run_segment_task(work: Any, segment: Segment, part: str) -> RunStats:
    """The Ray task: one segment through its own Pipeline into ``part``, on the node it landed on.

    Args:
        work: the run's :class:`streamconv.jobs.segment_work.SegmentWork` (how a segment is opened).
        segment: which frames. part: the part file (on a path every node sees).
    Returns: the segment's RunStats.
    """
    # Ray makes the GPU share it granted the task's only visible device: number 0 here.
    return work.open(segment, Path(part), 0).run()


def run_on_ray(work: Any, plan: Sequence[Segment], parts: Sequence[Path], *, address: str | None,
               jobs: int, stopped: Callable[[], bool]) -> list[RunStats] | None:
    """Run every segment of ``plan`` as a Ray task on the cluster at ``address`` (None: the one in
    RAY_ADDRESS, or a new local one), each asking for one CPU and, when it uses a GPU (the cuda
    backend or NVDEC), ``1 / jobs`` of one.

    Returns:
        The segments' stats in order, or None when ``stopped()`` turned true first (every task
        is then cancelled).
    Raises:
        A segment's own error (the other tasks are cancelled); StreamconvError for a segment
        whose task was lost more than MAX_RETRIES times; Interrupted on a second signal.
    """
    ray = ray_module()
    connect(ray, address)
    gpu = work.settings.backend == "cuda" or work.decoder == "nvdec"
    task = ray.remote(run_segment_task).options(num_gpus=1.0 / jobs if gpu else 0, num_cpus=1,
                                                max_retries=MAX_RETRIES, retry_exceptions=False)
    refs = [task.remote(work, segment, str(parts[segment.index])) for segment in plan]
    try:
        return _results(ray, refs, stopped)
    finally:
        _cancel(ray, refs)


def _results(ray, refs: list, stopped: Callable[[], bool]) -> list[RunStats] | None:
    """Each task's result as it comes; a failure is raised at once; None once stopped."""
    results: dict[Any, RunStats] = {}
    pending = list(refs)
    watch = HeadWatch(ray)
    while pending and not stopped():
        watch.check("the output is not written")
        done, pending = ray.wait(pending, num_returns=1, timeout=0.25)
        for ref in done:
            results[ref] = _result(ray, ref, refs.index(ref))
    return None if pending else [results[ref] for ref in refs]


def _result(ray, ref, index: int) -> RunStats:
    try:
        stats = ray.get(ref)
    # the segment's own error, as a one-piece run raises it
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        raise (cause if isinstance(cause, BaseException) else exc) from None
    except ray.exceptions.RayError as exc:
        raise StreamconvError(f"the Ray task of segment {index} was lost after {MAX_RETRIES} "
                              f"retries: {type(exc).__name__}: {exc}") from None
    stats.first_written = None  # another process's clock
    return stats


def _cancel(ray, refs: list) -> None:
    """Cancel the tasks not finished (their workers are killed) and wait for them to end, so
    that none writes into the parts folder after it is removed."""
    _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=0)
    for ref in unfinished:
        ray.cancel(ref, force=True)
    if unfinished:
        ray.wait(unfinished, num_returns=len(unfinished), timeout=CANCEL_WAIT)
