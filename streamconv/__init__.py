"""streamconv: 2D convolution filters over video on an NVIDIA GPU, with a CPU reference backend.

The public API is what this module exports::

    import streamconv
    edges = streamconv.Filter("edge")(frame)                 # one frame, H x W x 3 uint8
    with streamconv.StreamFilter("edge", ring=3) as sf:      # overlapped with your loop
        for out in sf.map(frames): ...
    stats = streamconv.Pipeline("in.mp4", ["gaussian:sigma=2", "edge"], "out.mp4").run()
    # one output each
    result = streamconv.run_many(["webcam:0", "webcam:1"], ["edge"], "cam{n}.mp4")
"""

from typing import TYPE_CHECKING

_EXPORTS = {
    "Filter": "embed.filter", "StreamFilter": "embed.streamfilter",
    "BORDER_MODES": "frames.borders", "DEFAULT_BORDER": "frames.borders",
    "DisplaySink": "io.sinks.display",
    "BackendUnavailableError": "errors", "CameraError": "errors", "CameraLostError": "errors",
    "DisplayError": "errors", "FilterSpecError": "errors", "FrameFormatError": "errors",
    "FrameTypeError": "errors", "FrameDeviceError": "errors", "GpuFaultError": "errors",
    "InputError": "errors",
    "Interrupted": "errors", "KernelCompileError": "errors", "NoVideoStreamError": "errors",
    "OutputError": "errors", "PresetError": "errors", "SettingsError": "errors",
    "ShapeError": "errors", "StreamconvError": "errors", "StreamError": "errors",
    "build_filter": "chain.filters", "FilterStage": "chain.filters", "parse_chain": "chain.filters",
    "parse_filter": "chain.filters",
    "Pipeline": "run.pipeline", "run_many": "jobs.several", "MultiRun": "jobs.several",
    "MultiResult": "jobs.several", "list_presets": "chain.presets", "load_preset": "chain.presets",
    "LivePattern": "io.sources.pattern", "LiveSource": "io.sources.live",
    "RealtimeSource": "io.sources.live",
    "CallbackSink": "io.sinks.sink", "FanoutSink": "io.sinks.sink", "FileSink": "io.sinks.file",
    "NullSink": "io.sinks.sink", "open_sink": "io.open",
    "FrameMeta": "frames.slots",
    "FileSource": "io.sources.file", "NvdecSource": "io.sources.nvdec.source",
    "Batch": "jobs.batch", "run_batch": "jobs.batch", "batch": "jobs.batch",
    "ArraySource": "io.sources.arrays", "open_source": "io.open",
    "TestPattern": "io.sources.pattern",
    "RunStats": "run.stats", "DeviceFrame": "interop.device_frame",
    "WebcamSource": "io.sources.camera", "run_segments": "jobs.segments",
    "__version__": "version",
}
"""Public name -> the submodule that defines it."""
_ALIASES = {"batch": "run_batch"}
"""Public names that are another name's object: ``streamconv.batch(...)`` is :func:`run_batch`."""

if TYPE_CHECKING:  # what a type checker reads; at run time each name loads on first use
    from .chain.filters import build_filter, FilterStage, parse_chain, parse_filter
    from .chain.presets import list_presets, load_preset
    from .embed.filter import Filter
    from .embed.streamfilter import StreamFilter
    from .errors import (BackendUnavailableError, CameraError, CameraLostError, DisplayError,
                         FilterSpecError, FrameDeviceError, FrameFormatError, FrameTypeError,
                         GpuFaultError, InputError, Interrupted, KernelCompileError,
                         NoVideoStreamError, OutputError, PresetError, SettingsError, ShapeError,
                         StreamconvError, StreamError)
    from .frames.borders import BORDER_MODES, DEFAULT_BORDER
    from .frames.slots import FrameMeta
    from .interop.device_frame import DeviceFrame
    from .io.open import open_sink, open_source
    from .io.sinks.display import DisplaySink
    from .io.sinks.file import FileSink
    from .io.sinks.sink import CallbackSink, FanoutSink, NullSink
    from .io.sources.arrays import ArraySource
    from .io.sources.camera import WebcamSource
    from .io.sources.file import FileSource
    from .io.sources.live import LiveSource, RealtimeSource
    from .io.sources.nvdec.source import NvdecSource
    from .io.sources.pattern import LivePattern, TestPattern
    from .jobs.batch import Batch, run_batch, run_batch as batch
    from .jobs.segments import run_segments
    from .jobs.several import MultiResult, MultiRun, run_many
    from .run.pipeline import Pipeline
    from .run.stats import RunStats
    from .version import __version__


def __getattr__(name: str):
    """Load a public name's submodule on first use: ``import streamconv`` stays light (the
    command installs its signal handlers before NumPy, OpenCV and PyAV load)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streamconv' has no attribute {name!r}")
    # __import__, not importlib: `import streamconv` imports nothing before the command holds
    # its signals (streamconv.launch)
    value = __import__(f"{__name__}.{module}", fromlist=["__name__"])
    value = getattr(value, _ALIASES.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "__version__",
    "ArraySource",
    "BackendUnavailableError",
    "Batch",
    "BORDER_MODES",
    "build_filter",
    "CallbackSink",
    "CameraError",
    "CameraLostError",
    "DEFAULT_BORDER",
    "DeviceFrame",
    "DisplayError",
    "DisplaySink",
    "FanoutSink",
    "FileSink",
    "FileSource",
    "Filter",
    "FilterSpecError",
    "FilterStage",
    "FrameDeviceError",
    "FrameFormatError",
    "FrameMeta",
    "FrameTypeError",
    "GpuFaultError",
    "InputError",
    "Interrupted",
    "KernelCompileError",
    "list_presets",
    "LivePattern",
    "LiveSource",
    "MultiResult",
    "MultiRun",
    "load_preset",
    "NoVideoStreamError",
    "NullSink",
    "NvdecSource",
    "open_sink",
    "open_source",
    "OutputError",
    "parse_chain",
    "parse_filter",
    "Pipeline",
    "PresetError",
    "RealtimeSource",
    "batch",
    "run_batch",
    "run_many",
    "run_segments",
    "RunStats",
    "SettingsError",
    "ShapeError",
    "StreamconvError",
    "StreamError",
    "StreamFilter",
    "TestPattern",
    "WebcamSource",
]
