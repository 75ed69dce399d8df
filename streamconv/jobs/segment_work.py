"""How each segment of a segmented run (:mod:`streamconv.jobs.segments`) is made: the containers
its parts are written in (:data:`PART_FORMATS`), and :class:`SegmentWork`, which opens one
segment's :class:`~streamconv.run.pipeline.Pipeline` into its part file, the same in a thread of
this process and in a Ray task (:mod:`streamconv.jobs.ray.segments`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..chain.filters import FilterStage, parse_chain
from ..chain.resample import chain_shapes, pixel_stretch
from ..gpu.device import gpu_numbers
from ..io.ffmpeg.formats import default_codec, output_format
from ..io.open import open_sink
from ..io.sources.segment import Segment, segment_source
from ..run.pipeline import Pipeline
from ..run.settings import RunSettings

PART_FORMATS = {"mp4": ".mp4", "mov": ".mov", "matroska": ".mkv", "webm": ".webm"}
"""The containers that keep an encoder's timestamps as given (pts, and dts below 0 where B-frames
are reordered), with a part's extension: a part is written in the output's container where it is
one of these, else in MOV, whose packets the others take (MPEG-TS shifts a file's timestamps to
start at 0, each part's by its own amount; AVI keeps none)."""


@dataclass
class SegmentWork:
    """How each segment of a run is made, the one home of that work for the threads of this
    process and for Ray tasks (picklable: it goes to a task as it is).

    Attributes:
        source: the input file. filters: the chain's stages (parsed: a part's size is the
            chain's output's). format: the parts' container (see PART_FORMATS).
        settings: the run's, backend resolved (each segment's device set where it runs).
        devices: the GPUs segments run in threads take in turn (a Ray task takes the one Ray
            grants it).
        sink_options, source_options: FileSink's (the codec the output's, named) and FileSource's.
        pipeline_options: Pipeline's other keywords.
    """

    source: str
    filters: list[FilterStage]
    format: str
    settings: RunSettings
    devices: list[int]
    sink_options: dict[str, Any]
    source_options: dict[str, Any]
    pipeline_options: dict[str, Any]

    @classmethod
    def make(cls, source, filters, output, *, settings: RunSettings, devices, format: str | None,
             sink_options: dict, source_options: dict, pipeline_options: dict) -> "SegmentWork":
        """The work of a run into ``output``; the backend resolved once here (auto's notice)."""
        devices = gpu_numbers(devices)
        container = output_format(output, format)
        options = dict(sink_options)
        # a part's container has its own default codec: the output's is named
        options["codec"] = options.get("codec") or default_codec(output, format)
        # parsed: chain_shapes() reads the sizes off FilterStages (a spec string has none, so a
        # part would be opened at the input's size and its frames scaled back up to it)
        stages = parse_chain(filters)
        return cls(str(source), stages, container if container in PART_FORMATS else "mov",
                   replace(settings, device=devices[0]).resolved(), devices, options,
                   source_options, pipeline_options)

    @property
    def decoder(self) -> str:
        """Who decodes each segment: NVDEC when named, else libavcodec."""
        return self.settings.decoder_to_open(segmented=True)

    def open(self, segment: Segment, part: Path, device: int) -> Pipeline:
        """One segment's Pipeline, not yet run: its source (frames in host memory, or in device
        memory on NVDEC), its part file on ``device``'s GPU (the cuda backend or NVDEC). The part
        is published whole when the pipeline ends and may replace one an earlier attempt of the
        same segment completed (a Ray retry); the parts folder is the run's own."""
        source = segment_source(self.source, segment, decoder=self.decoder, device=device,
                                **self.source_options)
        sink = None
        try:
            shape = chain_shapes(self.filters, source.shape)[-1]
            sink = open_sink(part, like=source, shape=shape,
                             stretch=pixel_stretch(self.filters, source.shape),
                             format=self.format, overwrite=True,
                             **self._part_options(source))
            return Pipeline(source, self.filters, sink,
                            settings=replace(self.settings, device=device),
                            **self.pipeline_options)
        except BaseException:
            source.close()
            if sink is not None:
                sink.abort()
            raise

    def _part_options(self, source) -> dict[str, Any]:
        """The sink's options for a part. An MP4 or MOV part states where it starts by an edit
        list in the movie's time scale (milliseconds by default): it is given the input's own,
        so that the joined pts are the input's exactly (0.3333 s at 1/15360 is not a whole ms)."""
        if self.format not in ("mp4", "mov") or source.time_base.numerator != 1:
            return self.sink_options
        muxer = {"movie_timescale": str(source.time_base.denominator),
                 **(self.sink_options.get("muxer_options") or {})}
        return {**self.sink_options, "muxer_options": muxer}
