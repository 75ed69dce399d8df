"""streamconv: 2D convolution filters over video on an NVIDIA GPU, with a CPU reference backend.

The public API is what this module exports::

    import streamconv
    edges = streamconv.Filter("edge")(frame)                 # one frame, H x W x 3 uint8
    with streamconv.StreamFilter("edge", ring=3) as sf:      # overlapped with your loop
        for out in sf.map(frames): ...
    stats = streamconv.Pipeline("in.mp4", ["gaussian:sigma=2", "edge"], "out.mp4").run()
"""

__version__ = "0.1.0"

from .api import Filter, StreamFilter  # noqa: E402
from .borders import BORDER_MODES, DEFAULT_BORDER  # noqa: E402
from .display import DisplaySink  # noqa: E402
from .errors import (  # noqa: E402
    BackendUnavailableError,
    CameraError,
    CameraLostError,
    DisplayError,
    FilterSpecError,
    FrameFormatError,
    FrameTypeError,
    GpuFaultError,
    InputError,
    KernelCompileError,
    NoVideoStreamError,
    OutputError,
    PresetError,
    ShapeError,
    StreamconvError,
    StreamError,
)
from .filters import FilterStage, build_filter, parse_chain, parse_filter  # noqa: E402
from .pipeline import Pipeline  # noqa: E402
from .presets import list_presets, load_preset  # noqa: E402
from .live import LivePattern, LiveSource, RealtimeSource  # noqa: E402
from .sinks import CallbackSink, FanoutSink, FileSink, NullSink, open_sink  # noqa: E402
from .slots import FrameMeta  # noqa: E402
from .filesource import FileSource  # noqa: E402
from .sources import ArraySource, TestPattern, open_source  # noqa: E402
from .stats import RunStats  # noqa: E402
from .webcam import WebcamSource  # noqa: E402

__all__ = [
    "ArraySource",
    "BackendUnavailableError",
    "BORDER_MODES",
    "build_filter",
    "CallbackSink",
    "CameraError",
    "CameraLostError",
    "DEFAULT_BORDER",
    "DisplayError",
    "DisplaySink",
    "FanoutSink",
    "FileSink",
    "FileSource",
    "Filter",
    "FilterSpecError",
    "FilterStage",
    "FrameFormatError",
    "FrameMeta",
    "FrameTypeError",
    "GpuFaultError",
    "InputError",
    "KernelCompileError",
    "list_presets",
    "LivePattern",
    "LiveSource",
    "load_preset",
    "NoVideoStreamError",
    "NullSink",
    "open_sink",
    "open_source",
    "OutputError",
    "parse_chain",
    "parse_filter",
    "Pipeline",
    "PresetError",
    "RealtimeSource",
    "RunStats",
    "ShapeError",
    "StreamconvError",
    "StreamError",
    "StreamFilter",
    "TestPattern",
    "WebcamSource",
    "__version__",
]
