"""What a sink that steers its run (a display window, a wall of tiles) gets of it: a narrow handle
to stop the run, swap its filter chain and read its status; never the run itself.

:class:`RunHandle` is the contract; the pipeline (:mod:`streamconv.run.steering`) implements it
and passes one to ``sink.attach`` before the first frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class RunStatus:
    """A run as a steering sink sees it, at one moment.

    Attributes:
        live: whether its source's frames come on their own clock (a camera): a pause drops them
            instead of holding the source.
        stopping: whether it was asked to stop (a key, a signal, an error).
        dropped: frames dropped so far (by a live source, and stale slots skipped).
        label: the name of the chain it runs (None: unnamed).
    """

    live: bool = False
    stopping: bool = False
    dropped: int = 0
    label: str | None = None


@runtime_checkable
class RunHandle(Protocol):
    """The run a steering sink is attached to; every method is safe from any thread."""

    def stop(self) -> None:
        """Ask the run to stop reading and finish its output."""

    def swap_chain(self, chain: Sequence[Any], label: str) -> None:
        """Run ``chain`` (filter specs or FilterStage objects, applied in order) from the next
        frames on, named ``label``; a malformed chain raises FilterSpecError here."""

    def status(self) -> RunStatus:
        """The run's :class:`RunStatus` now."""

    def name_chain(self, label: str) -> None:
        """Name the chain the run starts with ``label``, unless it has a name already."""
