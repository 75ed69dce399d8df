"""A picture of a run: one self-contained HTML page (inline style, script and SVG; nothing
fetched) with each run's stage table, a per-frame timeline of every stage with drops and damage
marked, a latency histogram, the command and the ``info`` lines; made from what --stats-json
writes (:meth:`streamconv.run.stats.RunStats.to_dict`, with the run's outcome), so a page can be
made again from such a file (``streamconv report stats.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from ..files.publish import write_atomically
from ..files.resources import read_limited
from .page import page

MAX_STATS_BYTES = 256 * 2**20
"""A stats file larger than this is refused (one run's is about 1 MB at the default cap)."""


def render_report(records: dict | list[dict]) -> str:
    """The page (HTML text) of one run's record or of several sources' list of records, each as
    --stats-json writes it; the command and ``info`` lines are the first record's."""
    runs = _runs(records, "the records")
    return page(runs, command=_lines(runs[0].get("command")), info=_lines(runs[0].get("info")))


def load_stats(path: str | Path) -> dict | list[dict]:
    """The record(s) of a --stats-json file (read with a size cap, host memory).

    Raises:
        InputError: (exit 4) unreadable, too large, not JSON, or not a stats record.
    """
    what = f"stats file {path}"
    data = read_limited(Path(path), MAX_STATS_BYTES, what=what, error=InputError)
    try:
        records = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{what}: not JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise InputError(f"{what}: not JSON (nested too deeply)") from None
    _runs(records, what)
    return records


def write_report(path: str | Path, records: dict | list[dict], *, overwrite: bool = False,
                 protect=(), what: str = "--report") -> None:
    """Write the page of ``records`` to ``path``, whole or not at all, never over one of
    ``protect`` nor over an existing file without ``overwrite`` (publish.write_atomically).

    Raises:
        OutputError: (exit 6) as write_atomically.
    """
    write_atomically(path, render_report(records), overwrite=overwrite, protect=protect,
                     what=what)


def _runs(records, what: str) -> list[dict]:
    """``records`` as a list of runs, each checked to be a stats record.

    Raises:
        InputError: not an object (or a list of them) with the fields --stats-json writes.
    """
    runs = records if isinstance(records, list) else [records]
    if not runs:
        raise InputError(f"{what}: no run in it")
    for run in runs:
        if not isinstance(run, dict) or not isinstance(run.get("stages_ms", {}), dict) or \
                not isinstance(run.get("frames"), int):
            raise InputError(f"{what}: not what --stats-json writes (an object with frames and "
                             f"stages_ms, or a list of them)")
        samples = run.get("samples_ms", {})
        if not isinstance(samples, dict) or not all(map(_numbers, samples.values())):
            raise InputError(f"{what}: samples_ms is not lists of numbers per stage")
        if not _timeline_ok(run.get("timeline", {})):
            raise InputError(f"{what}: its timeline is not what --stats-json writes")
    return runs


def _timeline_ok(timeline) -> bool:
    """Whether a record's timeline is FrameTimeline.to_dict's shape (start_s may hold nulls)."""
    if not isinstance(timeline, dict):
        return False
    starts, events = timeline.get("start_s", []), timeline.get("events", [])
    return isinstance(starts, list) and _numbers([t for t in starts if t is not None]) and \
        isinstance(events, list) and all(_numbers(e) and len(e) == 3 for e in events)


def _numbers(values) -> bool:
    """Whether ``values`` is a list of numbers (JSON's: no NaN, no infinity)."""
    return isinstance(values, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _no_constant(name: str):
    """json's hook for NaN and Infinity, which JSON itself has no words for."""
    raise ValueError(f"{name} is no JSON number")


def _lines(value) -> list[str] | None:
    """A list of strings from a record, or None where it holds none."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None
