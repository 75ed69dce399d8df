"""Opening sources and sinks by name: ``open_source(spec)`` and ``open_sink(output, like=source)``.

A SOURCE or ``-o`` string is parsed once (:mod:`streamconv.io.spec`) and opened through a table
from its kind to an opener: the test pattern (streamconv.io.sources.pattern), a camera
(streamconv.io.sources.camera), standard input, raw video or an image sequence
(streamconv.io.sources.demuxed), or else a file or stream (streamconv.io.sources.file, reopened on
drops by streamconv.io.sources.reconnect); an output is discarded (null), encoded to a file, a
pipe or an image sequence (streamconv.io.sinks.file), sent to a network URL
(streamconv.io.sinks.network), or shown on a virtual camera (streamconv.io.sinks.vcam). This
module imports every concrete source and sink; none of those imports it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import InputError, OutputError, SettingsError
from ..frames.arguments import check_flag, check_options, check_path, keywords_of
from .sinks.file import FileSink
from .sinks.network import NetworkSink
from .sinks.sink import NullSink, Sink
from .sinks.vcam import VirtualCameraSink
from .sources.camera import WebcamSource, open_webcam
from .sources.demuxed import DemuxedSource
from .sources.file import FileSource
from .sources.nvdec.caps import DECODERS, NvdecMissing, NvdecUnsupported
from .sources.nvdec.source import NvdecSource
from .sources.pattern import parse_test_spec
from .sources.reconnect import RECONNECT_WINDOW, ReconnectingSource
from .sources.source import Source
from .sources.trim import Trim, open_trimmed
from .spec import OutputSpec, SourceSpec, parse_output, parse_source

log = logging.getLogger(__name__)


def open_source(spec: str | Path | SourceSpec | Source, *, decoder: str = "cpu", device: int = 0,
                reconnect: bool = False, reconnect_timeout: float | None = RECONNECT_WINDOW,
                trim: Trim | None = None, **options) -> Source:
    """Open a source from a spec: ``test[...]`` for the pattern, ``webcam[:N]`` or ``/dev/videoN``
    for a camera, ``-`` (standard input, also ``pipe:0``) or an image sequence (``img%04d.png``)
    for DemuxedSource, else a path or URL for FileSource (or NvdecSource).

    Args:
        spec: the SOURCE argument of ``streamconv run`` (or its :class:`SourceSpec`), or a
            Source (returned as is).
        decoder: for a file or stream: ``"cpu"`` (libavcodec), ``"nvdec"`` (the GPU's hardware
            decoder, frames left in device memory:
            :class:`streamconv.io.sources.nvdec.source.NvdecSource`), or ``"auto"``: NVDEC if it can
            take the stream, else the CPU with a notice (also from a mid-stream change NVDEC cannot
            take on).
        device: the CUDA device NVDEC decodes on.
        reconnect: for a file or stream (a URL): reopen it whenever it stalls (``timeout``) or
            ends, with a growing pause, for up to ``reconnect_timeout`` seconds after each loss
            (None or 0: no limit); see :class:`streamconv.io.sources.reconnect.ReconnectingSource`.
        options: keyword options passed to FileSource (``video_stream``, ``threads``,
            ``copy_streams``, ``max_pixels``, ``timeout``, ``depth``, ``hwaccel``,
            ``input_options``: FFmpeg's options of the demuxer and protocol), and for
            DemuxedSource also ``format`` (the demuxer, e.g. ``"rawvideo"``: any spec is then
            read with it), ``size`` (W, H), ``pix_fmt`` and ``fps`` (raw video, image sequences);
            or, for a camera, to WebcamSource (``width``, ``height``, ``fps``, ...).
        trim: only this stretch of a file or stream, cut as -ss, -t and -to (:mod:`.trim`).

    Raises:
        NvdecUnsupported: (exit 7) ``decoder="nvdec"`` and NVDEC cannot take the stream here (nor
            a pipe, raw video or an image sequence: those decode on the CPU).
        InputError: an option the source does not take; ``reconnect`` or ``trim`` of a bad type.
    """
    if decoder not in DECODERS:
        raise SettingsError(f"unknown decoder {decoder!r}; known: {', '.join(DECODERS)}")
    reconnect = check_flag(reconnect, "reconnect", InputError)
    if isinstance(spec, Source):
        return spec
    if not isinstance(spec, SourceSpec):
        spec = parse_source(spec, format=options.get("format"))
    decoding = _Decoding(decoder, device, reconnect, reconnect_timeout)
    if trim is not None:
        return _open_trimmed(spec, trim, decoding, options)
    return SOURCE_OPENERS[spec.kind](spec, decoding, options)


@dataclass(frozen=True)
class _Decoding:
    """How a file or stream is decoded and kept open (open_source's arguments)."""

    decoder: str
    device: int
    reconnect: bool
    reconnect_timeout: float | None


def _open_pattern(spec: SourceSpec, _decoding: _Decoding, options: dict) -> Source:
    return parse_test_spec(spec.text, max_pixels=options.get("max_pixels"))


def _open_camera(spec: SourceSpec, _decoding: _Decoding, options: dict) -> Source:
    options.pop("max_pixels", None)  # a camera delivers the size it is asked for
    return open_webcam(spec.text, **_taken_by(options, WebcamSource))


def _open_demuxed(spec: SourceSpec, decoding: _Decoding, options: dict) -> Source:
    if decoding.decoder == "nvdec":
        raise NvdecUnsupported(f"--decoder nvdec reads files and URLs; {spec.text} is decoded on "
                               "the CPU")
    if spec.format is not None:
        options.setdefault("format", spec.format)
    return DemuxedSource(spec.text, **_taken_by(options, DemuxedSource, FileSource))


def _open_stream(spec: SourceSpec, decoding: _Decoding, options: dict) -> Source:
    options = _taken_by(options, FileSource)
    if decoding.reconnect:
        return ReconnectingSource(lambda: _open_file(spec.text, decoding.decoder, decoding.device,
                                                     options),
                                  within=decoding.reconnect_timeout)
    return _open_file(spec.text, decoding.decoder, decoding.device, options)


SOURCE_OPENERS: dict[str, Callable[[SourceSpec, _Decoding, dict], Source]] = {
    "pattern": _open_pattern, "camera": _open_camera, "pipe": _open_demuxed,
    "sequence": _open_demuxed, "demuxed": _open_demuxed, "url": _open_stream, "file": _open_stream,
}
"""The opener of each kind of source (:data:`streamconv.io.spec.SOURCE_KINDS`)."""


def _taken_by(options: dict, *opened: type) -> dict:
    """``options``, each a keyword one of the ``opened`` classes takes (InputError naming one
    none of them takes: it was a TypeError from inside the source)."""
    taken = set().union(*(keywords_of(kind) for kind in opened))
    return check_options(options, "open_source options", InputError, taken=taken)


def _open_trimmed(spec: SourceSpec, trim: Trim, decoding: _Decoding, options: dict) -> Source:
    """A file or stream's source that reads only ``trim`` of it.

    Raises:
        InputError: ``trim`` no Trim; a camera or test pattern, or reconnecting asked for: a cut
            is of a file or stream read once; an option the source does not take.
        NvdecUnsupported: (exit 7) NVDEC asked for: a cut decodes on the CPU.
    """
    if not isinstance(trim, Trim):
        raise InputError("trim must be a streamconv.io.sources.trim.Trim, got "
                         f"{type(trim).__name__}")
    if spec.kind in ("pattern", "camera") or decoding.reconnect:
        raise InputError(f"a cut ({trim.describe()}) is of a file or stream read once, not of "
                         f"{'a reconnecting input' if decoding.reconnect else spec.text}")
    if decoding.decoder == "nvdec":
        raise NvdecUnsupported(f"--decoder nvdec: a cut ({trim.describe()}) decodes on the CPU")
    if spec.is_demuxed and spec.format is not None:
        options.setdefault("format", spec.format)
    opened = (DemuxedSource, FileSource) if spec.is_demuxed else (FileSource,)
    return open_trimmed(spec.text, trim, demuxed=spec.is_demuxed, **_taken_by(options, *opened))


def _open_file(text: str, decoder: str, device: int, options: dict) -> Source:
    """A FileSource, or an NvdecSource where the decoder asked for takes the stream."""
    started = time.perf_counter()
    source = _open_nvdec(text, decoder, device, dict(options)) if decoder != "cpu" else None
    if source is None:
        source = FileSource(text, **options)
    log.debug("opened %s in %.1f ms", text, 1e3 * (time.perf_counter() - started))
    return source


def _open_nvdec(path: str, decoder: str, device: int, options: dict) -> Source | None:
    """An NvdecSource, or None where ``auto`` falls back to the CPU (said in the log)."""
    try:
        return NvdecSource(path, device=device, fallback=decoder == "auto", **options)
    except NvdecUnsupported as exc:
        if decoder == "nvdec":
            raise NvdecUnsupported(f"--decoder nvdec: {path}: {exc}") from None
        # Without PyNvVideoCodec, the CPU decoder is the plain default: only --verbose says so.
        level = logging.INFO if isinstance(exc, NvdecMissing) else logging.WARNING
        log.log(level, "%s: decoding on the CPU: %s", path, exc)
        return None


FROM_THE_SOURCE = ("path", "width", "height", "frame_rate", "time_base")
"""FileSink's arguments that :func:`open_sink` takes from the output and its source."""


def check_sink(output: object, options: object, *,
               names: tuple[str, str] = ("output", "options")) -> dict:
    """Refuse, before any work, an output that is neither None, a Sink nor a path, and sink
    options (``names``: what the caller calls both) that no file or network output takes, or an
    ``overwrite`` that is no bool (a string "no" replaced a file): OutputError naming them. The
    other options' values are checked where the sink uses them, as it opens (the encoder's by
    :mod:`streamconv.io.ffmpeg.encoder_check`, the file's by
    :func:`streamconv.io.sinks.targets.open_target`).

    Returns:
        The options, as a new dict.
    """
    if output is not None and not isinstance(output, (Sink, OutputSpec)):
        check_path(output, names[0], OutputError)
    taken = keywords_of(FileSink) - set(FROM_THE_SOURCE)
    options = check_options(options, names[1], OutputError, taken=taken)
    if "overwrite" in options:
        check_flag(options["overwrite"], "overwrite", OutputError)
    return options


def open_sink(output: str | Path | OutputSpec | Sink | None, *, like=None,
              shape: tuple[int, ...] | None = None, stretch: Fraction = Fraction(1),
              **options) -> Sink:
    """Open a sink: None or "null" discards, a Sink passes through, a network URL (``rtmp://``,
    ``rtsp://``, ``srt://``, ``udp://``, ``tcp://``) makes a NetworkSink, ``vcam[:DEVICE]`` a
    VirtualCameraSink (encoder options do not apply), a path a FileSink: a file, ``-`` (standard
    output, also ``pipe:1``) or an image sequence (``out%03d.png``).

    Args:
        output: the -o argument (or its :class:`OutputSpec`).
        like: the Source whose size, rate and time base the output takes; a file output never
            replaces its input (``path``), whatever ``overwrite`` says.
        shape: the frames' (H, W, C) where the filter chain changes the size (``scale``,
            ``crop``); None: ``like``'s.
        stretch: how much wider for its height the chain makes a pixel
            (:func:`streamconv.chain.resample.pixel_stretch`): the input's pixel aspect ratio
            is written times it.
        options: FileSink keyword options (codec, pix_fmt, crf, preset, overwrite, format: the
            container, e.g. ``"mpegts"``, by default the extension's, Matroska for ``-``, by scheme
            for a URL; muxer_options); a network output is sent as it is written (see NetworkSink).

    Raises:
        OutputError: as :func:`check_sink`, or ``like`` missing for a file or network output.
    """
    options = check_sink(output, options)
    if isinstance(output, Sink):
        return output
    spec = output if isinstance(output, OutputSpec) else parse_output(output,
                                                                      format=options.get("format"))
    if spec.kind == "null":
        return NullSink()
    if like is None:
        raise OutputError("open_sink needs the source (like=...) to size a file output")
    size = (shape[1], shape[0]) if shape is not None else (like.width, like.height)
    if stretch != 1 and getattr(like, "metadata", None) is not None:
        options.setdefault("metadata", like.metadata.stretched(stretch))
    return SINK_OPENERS[spec.kind](spec, like, size, options)


def _open_vcam(spec: OutputSpec, like, size: tuple[int, int], _options: dict) -> Sink:
    return VirtualCameraSink(spec.target, width=size[0], height=size[1], frame_rate=like.frame_rate)


def _open_encoded(spec: OutputSpec, like, size: tuple[int, int], options: dict) -> Sink:
    """A FileSink (NetworkSink for a URL) of ``size`` (W, H) that takes the source's rate, time
    base, colour, tags and copied streams, and never replaces the source's file."""
    path = getattr(like, "path", None)
    options.setdefault("protect", (path,) if path is not None else ())  # never replace the input
    options.setdefault("copy_streams", getattr(like, "copied_streams", ()))
    options.setdefault("colour", getattr(like, "colour", None))
    options.setdefault("display_matrix", getattr(like, "display_matrix", None))
    options.setdefault("metadata", getattr(like, "metadata", None))
    deep = getattr(like, "dtype", None) == np.uint16  # a source read in 8 bits is written in 8
    options.setdefault("bits", getattr(like, "bits", 8) if deep else 8)
    sink = NetworkSink if spec.kind == "network" else FileSink
    return sink(spec.target, width=size[0], height=size[1], frame_rate=like.frame_rate,
                time_base=like.time_base, **options)


SINK_OPENERS: dict[str, Callable[[OutputSpec, object, tuple[int, int], dict], Sink]] = {
    "vcam": _open_vcam, "network": _open_encoded, "pipe": _open_encoded, "sequence": _open_encoded,
    "image": _open_encoded, "file": _open_encoded,
}
"""The opener of each kind of output but null (:data:`streamconv.io.spec.OUTPUT_KINDS`)."""
