"""Opening sources and sinks by name: ``open_source(spec)`` and ``open_sink(output, like=source)``.

The dispatchers of the SOURCE and ``-o`` arguments: a spec names the test pattern
(streamconv.io.pattern), a camera (streamconv.io.camera), standard input, raw video or an image
sequence (streamconv.io.demuxed), or else a file or stream (streamconv.io.file, reopened on drops
by streamconv.io.reconnect); an output is discarded (null), encoded to a file, a pipe or an image
sequence (streamconv.io.filesink), sent to a network URL (streamconv.io.netsink), or shown on a
virtual camera (streamconv.io.vcam). They import every concrete source and sink; none of those
imports this module.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..arguments import check_flag, check_options, check_path, keywords_of
from ..errors import FilterSpecError, InputError, OutputError
from ..publish import without_file_scheme
from .camera import WebcamSource, is_webcam_spec, open_webcam
from .demuxed import DemuxedSource, is_demuxed_spec
from .file import FileSource
from .filesink import FileSink
from .netsink import NetworkSink, is_network_output
from .nvdec import NvdecSource
from .nvdec_caps import DECODERS, NvdecMissing, NvdecUnsupported
from .pattern import is_test_spec, parse_test_spec
from .reconnect import RECONNECT_WINDOW, ReconnectingSource
from .sink import CallbackSink, FanoutSink, NullSink, Sink
from .source import Source
from .trim import Trim, open_trimmed
from .vcam import VirtualCameraSink, is_vcam_output, vcam_device

log = logging.getLogger(__name__)

SINKS = {"file": FileSink, "network": NetworkSink, "vcam": VirtualCameraSink, "null": NullSink, "callback": CallbackSink, "fanout": FanoutSink}
"""Sinks by name."""


def open_source(spec: str | Path | Source, *, decoder: str = "cpu", device: int = 0,
                reconnect: bool = False, reconnect_timeout: float | None = RECONNECT_WINDOW,
                trim: Trim | None = None, **options) -> Source:
    """Open a source from a spec: ``test[...]`` for the pattern, ``webcam[:N]`` or ``/dev/videoN``
    for a camera, ``-`` (standard input, also ``pipe:0``) or an image sequence (``img%04d.png``)
    for DemuxedSource, else a path or URL for FileSource (or NvdecSource).

    Args:
        spec: the SOURCE argument of ``streamconv run``, or a Source (returned as is).
        decoder: for a file or stream: ``"cpu"`` (libavcodec), ``"nvdec"`` (the GPU's hardware
            decoder, frames left in device memory: :class:`streamconv.io.nvdec.NvdecSource`), or
            ``"auto"``: NVDEC if it can take the stream, else the CPU with a notice (also from a
            mid-stream change NVDEC cannot take on).
        device: the CUDA device NVDEC decodes on.
        reconnect: for a file or stream (a URL): reopen it whenever it stalls (``timeout``) or
            ends, with a growing pause, for up to ``reconnect_timeout`` seconds after each loss
            (None or 0: no limit); see :class:`streamconv.io.reconnect.ReconnectingSource`.
        options: keyword options passed to FileSource (``video_stream``, ``threads``, ``depth``,
            ``copy_streams``, ``max_pixels``, ``timeout``, ``hwaccel``, ``input_options``:
            FFmpeg's options of the demuxer and protocol), for DemuxedSource also ``format`` (the
            demuxer, e.g. ``"rawvideo"``: any spec is then read with it), ``size`` (W, H),
            ``pix_fmt`` and ``fps``; or, for a camera, to WebcamSource (``width``, ``fps``, ...).
        trim: only this stretch of a file or stream, cut as -ss, -t and -to (:mod:`.trim`).

    Raises:
        NvdecUnsupported: (exit 7) ``decoder="nvdec"`` and NVDEC cannot take the stream here (nor
            a pipe, raw video or an image sequence: those decode on the CPU).
        InputError: an option the source does not take; ``reconnect`` or ``trim`` of a bad type.
    """
    if decoder not in DECODERS:
        raise FilterSpecError(f"unknown decoder {decoder!r}; known: {', '.join(DECODERS)}")
    reconnect = check_flag(reconnect, "reconnect", InputError)
    if isinstance(spec, Source):
        return spec
    text = str(spec)
    if trim is not None:
        return _open_trimmed(text, trim, decoder, reconnect, options)
    if is_test_spec(text):
        return parse_test_spec(text, max_pixels=options.get("max_pixels"))
    if is_webcam_spec(text):
        options.pop("max_pixels", None)  # a camera delivers the size it is asked for
        return open_webcam(text, **_taken_by(options, WebcamSource))
    if is_demuxed_spec(text, options.get("format")):
        if decoder == "nvdec":
            raise NvdecUnsupported(f"--decoder nvdec reads files and URLs; {text} is decoded on the CPU")
        return DemuxedSource(text, **_taken_by(options, DemuxedSource, FileSource))
    options = _taken_by(options, FileSource)
    if reconnect:
        return ReconnectingSource(lambda: _open_file(text, decoder, device, options), within=reconnect_timeout)
    return _open_file(text, decoder, device, options)


def _taken_by(options: dict, *opened: type) -> dict:
    """``options``, each a keyword one of the ``opened`` classes takes (InputError naming one
    none of them takes: it was a TypeError from inside the source)."""
    taken = set().union(*(keywords_of(kind) for kind in opened))
    return check_options(options, "open_source options", InputError, taken=taken)


def _open_trimmed(text: str, trim: Trim, decoder: str, reconnect: bool, options: dict) -> Source:
    """A file or stream's source that reads only ``trim`` of it.

    Raises:
        InputError: ``trim`` no Trim; a camera or test pattern, or reconnecting asked for: a cut
            is of a file or stream read once; an option the source does not take.
        NvdecUnsupported: (exit 7) NVDEC asked for: a cut decodes on the CPU.
    """
    if not isinstance(trim, Trim):
        raise InputError(f"trim must be a streamconv.io.trim.Trim, got {type(trim).__name__}")
    if is_test_spec(text) or is_webcam_spec(text) or reconnect:
        raise InputError(f"a cut ({trim.describe()}) is of a file or stream read once, not of "
                         f"{'a reconnecting input' if reconnect else text}")
    if decoder == "nvdec":
        raise NvdecUnsupported(f"--decoder nvdec: a cut ({trim.describe()}) decodes on the CPU")
    demuxed = is_demuxed_spec(text, options.get("format"))
    opened = (DemuxedSource, FileSource) if demuxed else (FileSource,)
    return open_trimmed(text, trim, demuxed=demuxed, **_taken_by(options, *opened))


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


def writes_a_file(output: str | Path) -> bool:
    """Whether an output is a file (checked and published whole), not a network URL, which is
    sent to as it is written, nor a virtual camera."""
    return not is_network_output(output) and not is_vcam_output(output)


FROM_THE_SOURCE = ("path", "width", "height", "frame_rate", "time_base")
"""FileSink's arguments that :func:`open_sink` takes from the output and its source."""


def check_sink(output: object, options: object, *,
               names: tuple[str, str] = ("output", "options")) -> dict:
    """Refuse, before any work, an output that is neither None, a Sink nor a path, and sink
    options (``names``: what the caller calls both) that no file or network output takes, or
    an ``overwrite`` that is no bool (a string "no" replaced a file): OutputError naming them.
    The other options' values are checked where the sink uses them, as it opens (the encoder's by
    :mod:`streamconv.io.encoder_check`, the file's by :func:`streamconv.io.targets.open_target`).

    Returns:
        The options, as a new dict.
    """
    if output is not None and not isinstance(output, Sink):
        check_path(output, names[0], OutputError)
    taken = keywords_of(FileSink) - set(FROM_THE_SOURCE)
    options = check_options(options, names[1], OutputError, taken=taken)
    if "overwrite" in options:
        check_flag(options["overwrite"], "overwrite", OutputError)
    return options


def open_sink(output: str | Path | Sink | None, *, like=None, shape: tuple[int, ...] | None = None,
              **options) -> Sink:
    """Open a sink: None or "null" discards, a Sink passes through, a network URL (``rtmp://``,
    ``rtsp://``, ``srt://``, ``udp://``, ``tcp://``) makes a NetworkSink, ``vcam[:DEVICE]`` a
    VirtualCameraSink (encoder options do not apply), a path a FileSink: a file, ``-`` (standard
    output, also ``pipe:1``) or an image sequence (``out%03d.png``).

    Args:
        output: the -o argument.
        like: the Source whose size, rate and time base the output takes; a file output never
            replaces its input (``path``), whatever ``overwrite`` says.
        shape: the frames' (H, W, C) where the filter chain changes the size (``scale``,
            ``crop``); None: ``like``'s.
        options: FileSink keyword options (codec, pix_fmt, crf, preset, overwrite, format: the
            container, e.g. ``"mpegts"``, by default the extension's, Matroska for ``-``, by scheme
            for a URL; muxer_options); a network output is sent as it is written (see NetworkSink).

    Raises:
        OutputError: as :func:`check_sink`, or ``like`` missing for a file or network output.
    """
    options = check_sink(output, options)
    if isinstance(output, Sink):
        return output
    if output is None or str(output) == "null":
        return NullSink()
    if like is None:
        raise OutputError("open_sink needs the source (like=...) to size a file output")
    if isinstance(output, str):
        output = without_file_scheme(output)
    height, width = shape[:2] if shape is not None else (like.height, like.width)
    if is_vcam_output(output):
        return VirtualCameraSink(vcam_device(output), width=width, height=height,
                                 frame_rate=like.frame_rate)
    path = getattr(like, "path", None)
    options.setdefault("protect", (path,) if path is not None else ())  # never replace the input
    options.setdefault("copy_streams", getattr(like, "copied_streams", ()))
    options.setdefault("colour", getattr(like, "colour", None))
    options.setdefault("display_matrix", getattr(like, "display_matrix", None))
    options.setdefault("metadata", getattr(like, "metadata", None))
    deep = getattr(like, "dtype", None) == np.uint16  # a source read in 8 bits is written in 8
    options.setdefault("bits", getattr(like, "bits", 8) if deep else 8)
    sink = NetworkSink if is_network_output(output) else FileSink
    return sink(output, width=width, height=height, frame_rate=like.frame_rate,
                time_base=like.time_base, **options)
