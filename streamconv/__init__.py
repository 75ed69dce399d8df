"""streamconv: 2D convolution filters over video on an NVIDIA GPU, with a CPU reference backend.

The public API is what this module exports::

    import streamconv
    edges = streamconv.Filter("edge")(frame)                 # one frame, H x W x 3 uint8
    with streamconv.StreamFilter("edge", ring=3) as sf:      # overlapped with your loop
        for out in sf.map(frames): ...
    stats = streamconv.Pipeline("in.mp4", ["gaussian:sigma=2", "edge"], "out.mp4").run()
    result = streamconv.run_many(["webcam:0", "webcam:1"], ["edge"], "cam{n}.mp4")  # one output each
"""

_EXPORTS = {
    "Filter": "api", "StreamFilter": "streamfilter",
    "BORDER_MODES": "borders", "DEFAULT_BORDER": "borders",
    "DisplaySink": "io.display",
    "BackendUnavailableError": "errors", "CameraError": "errors", "CameraLostError": "errors",
    "DisplayError": "errors", "FilterSpecError": "errors", "FrameFormatError": "errors",
    "FrameTypeError": "errors", "FrameDeviceError": "errors", "GpuFaultError": "errors", "InputError": "errors",
    "Interrupted": "errors", "KernelCompileError": "errors", "NoVideoStreamError": "errors",
    "OutputError": "errors", "PresetError": "errors", "ShapeError": "errors",
    "StreamconvError": "errors", "StreamError": "errors",
    "build_filter": "filters", "FilterStage": "filters", "parse_chain": "filters",
    "parse_filter": "filters",
    "Pipeline": "pipeline", "run_many": "multi", "MultiRun": "multi", "MultiResult": "multi",
    "list_presets": "presets", "load_preset": "presets",
    "LivePattern": "io.pattern", "LiveSource": "io.live", "RealtimeSource": "io.live",
    "CallbackSink": "io.sink", "FanoutSink": "io.sink", "FileSink": "io.filesink", "NullSink": "io.sink",
    "open_sink": "io.open",
    "FrameMeta": "slots",
    "FileSource": "io.file", "NvdecSource": "io.nvdec", "Batch": "batch", "run_batch": "batch", "batch": "batch",
    "ArraySource": "io.arrays", "open_source": "io.open", "TestPattern": "io.pattern",
    "RunStats": "stats", "DeviceFrame": "interop.device_frame",
    "WebcamSource": "io.camera", "run_segments": "segments",
    "__version__": "version",
}
"""Public name -> the submodule that defines it."""


def __getattr__(name: str):
    """Load a public name's submodule on first use: ``import streamconv`` stays light (the
    command installs its signal handlers before NumPy, OpenCV and PyAV load)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streamconv' has no attribute {name!r}")
    # __import__, not importlib: `import streamconv` imports nothing before the command holds
    # its signals (streamconv.launch)
    value = __import__(f"{__name__}.{module}", fromlist=["__name__"])
    if name != module:  # else the module itself: ``streamconv.batch(...)`` is run_batch
        value = getattr(value, name)
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
    "ShapeError",
    "StreamconvError",
    "StreamError",
    "StreamFilter",
    "TestPattern",
    "WebcamSource",
]
