"""The handle a sink that steers a run (a display) gets of a Pipeline: stop, swap the chain,
status (:class:`streamconv.io.sinks.steering.RunHandle`), and nothing else of the run."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from ..io.sinks.steering import RunStatus
from ..io.sources.source import Source


class _Steered(Protocol):
    """What of a Pipeline the handle reaches (named here, not imported: the pipeline imports this
    module)."""

    source: Source
    filter_label: str | None

    @property
    def stopping(self) -> bool: ...

    @property
    def dropped(self) -> int: ...

    def stop(self, signum: int | None = None) -> None: ...

    def set_filters(self, filters: Sequence[Any], *, label: str | None = None) -> None: ...


class PipelineHandle:
    """A :class:`~streamconv.io.sinks.steering.RunHandle` of one Pipeline.

    Args:
        pipeline: the :class:`streamconv.run.pipeline.Pipeline` to steer; the handle keeps it
            out of the sink's reach.
    """

    __slots__ = ("_pipeline",)

    def __init__(self, pipeline: _Steered) -> None:
        self._pipeline = pipeline

    def stop(self) -> None:
        """Ask the run to stop reading and finish its output; safe from any thread."""
        self._pipeline.stop()

    def swap_chain(self, chain: Sequence[Any], label: str) -> None:
        """Run ``chain`` (filter specs or FilterStage objects) from the next frames on, named
        ``label`` (see :meth:`streamconv.run.pipeline.Pipeline.set_filters`)."""
        self._pipeline.set_filters(chain, label=label)

    def status(self) -> RunStatus:
        """Whether the source is live, whether the run is stopping, frames dropped, the chain's
        name."""
        pipeline = self._pipeline
        return RunStatus(live=bool(getattr(pipeline.source, "is_live", False)),
                         stopping=pipeline.stopping, dropped=pipeline.dropped,
                         label=pipeline.filter_label)

    def name_chain(self, label: str) -> None:
        """Name the chain the run starts with ``label``, unless it has a name already."""
        if self._pipeline.filter_label is None:
            self._pipeline.filter_label = label
