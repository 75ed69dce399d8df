"""Check encoder settings before a run starts: a bad ``--preset`` or ``--crf`` is refused up
front (exit 6), not at the first frame after the source was opened and the pipeline started.

PyAV opens an encoder only when the first frame is encoded. :func:`check_encoder_options`
opens a throw-away one with the same settings at once (a few milliseconds: libx264 at
3840x2160 opens in about 3 ms, 18 ms with ``preset=veryslow``), and names the option it refuses.
The encoder itself (:func:`find_encoder`) and its pixel format (:func:`default_pix_fmt` picks
one for the input's depth, :func:`check_pix_fmt` refuses one it cannot take) are settled first.
"""

from __future__ import annotations

import logging
import os
from fractions import Fraction
from typing import Any, Iterable, Mapping

import av

from ...frames.arguments import check_instance, check_number, check_options
from ...errors import OutputError
from ...frames.colour import format_bits
from .formats import default_codec
from .log import ffmpeg_reason, quiet_encoder_threads

log = logging.getLogger(__name__)

_OPEN_ERRORS = (av.FFmpegError, ValueError, OverflowError, TypeError, OSError)
"""What opening a PyAV codec context raises for settings it refuses (ArgumentError, ERANGE as
OverflowError, a missing device as PermissionError...)."""


_DEEP_420 = ("yuv420p10le", "yuv420p12le", "p010le", "yuv420p16le", "p016le")
"""4:2:0 formats deeper than 8 bits, in order of preference for deep input."""

_DEEP_RGB = ("rgb48le", "rgb48be")
"""16-bit RGB, for deep input to an encoder without a deep 4:2:0 format (png, tiff)."""

_EIGHT_BIT = ("yuv420p", "yuvj420p", "rgb24", "bgr24", "rgb8")
"""8-bit formats in order of preference among those an encoder lists: yuv420p, JPEG's full-range
4:2:0, RGB for image encoders (png, ppm), and gif's 3-3-2 RGB."""

_JPEG = ("mjpeg", "ljpeg", "jpegls")
"""JPEG encoders: they list yuv420p but refuse its limited range; yuvj420p comes first for them."""


def find_encoder(codec: str) -> av.codec.Codec:
    """The FFmpeg encoder named ``codec``.

    Raises:
        OutputError: FFmpeg has no such encoder.
    """
    check_instance(codec, str, "codec", OutputError, expected="an encoder's name")
    try:
        return av.codec.Codec(codec, "w")
    except (av.FFmpegError, ValueError):
        raise OutputError(f"unknown encoder {codec!r} (see `ffmpeg -encoders`)") from None


def default_pix_fmt(encoder: av.codec.Codec, bits: int, *, warn: bool = True) -> str:
    """The pixel format for input of ``bits`` bits per sample: for 8 bits, the first of
    _EIGHT_BIT the encoder takes (yuvj420p first for JPEG; yuv420p for an encoder that lists
    none, such as rawvideo); for deeper
    input, its 4:2:0 (else 16-bit RGB) format of at least ``bits`` bits (the shallowest such),
    else its deepest, else the 8-bit choice with a warning (unless not ``warn``)."""
    supported = [f.name for f in (encoder.video_formats or ())]
    if bits > 8:
        deep = [name for name in _DEEP_420 + _DEEP_RGB if name in supported]
        depth = {name: format_bits(name) for name in deep}
        enough = [name for name in deep if depth[name] >= bits]
        if enough:
            return min(enough, key=lambda name: depth[name])
        if deep:
            return max(deep, key=lambda name: depth[name])
        if warn:
            log.warning("encoder %s has no 4:2:0 format deeper than 8 bits: the %d-bit input is "
                        "written with "
                        "8 bits per sample (choose a --codec such as libx264 or libx265 to keep "
                        "it)",
                        encoder.name, bits)
    if not supported:
        return "yuv420p"
    preference = ("yuvj420p", *_EIGHT_BIT) if encoder.name in _JPEG else _EIGHT_BIT
    return next((name for name in preference if name in supported), supported[0])


def deeper_pix_fmt(codec: str, pix_fmt: str, bits: int) -> str | None:
    """A pixel format the encoder ``codec`` takes that keeps more of ``bits``-bit input than
    ``pix_fmt`` does (the one :func:`default_pix_fmt` picks), or None when it has none."""
    choice = default_pix_fmt(find_encoder(codec), bits, warn=False)
    return choice if format_bits(choice) > format_bits(pix_fmt) else None


def check_pix_fmt(codec: str, encoder: av.codec.Codec, pix_fmt: str) -> None:
    """Refuse a pixel format FFmpeg does not know, or one the encoder (named ``codec``) cannot
    take: PyAV would only find out when it opens the encoder, at the first frame.

    Raises:
        OutputError: the message names the format and, if the encoder lists them, those it takes.
    """
    check_instance(pix_fmt, str, "pix_fmt", OutputError, expected="a pixel format's name")
    try:
        canonical = av.VideoFormat(pix_fmt).name  # aliases such as gbrp10 -> gbrp10le
    except ValueError:
        raise OutputError(f"unknown pixel format {pix_fmt!r} (see `ffmpeg -pix_fmts`)") from None
    supported = [f.name for f in (encoder.video_formats or ())]
    if supported and canonical not in supported:
        raise OutputError(f"encoder {codec} does not support pixel format {pix_fmt!r} "
                          f"(it takes: {', '.join(supported)})")


def _try_open(codec: str, pix_fmt: str, width: int, height: int, frame_rate: Fraction,
              options: Mapping[str, str]) -> tuple[BaseException | None, dict[str, str]]:
    """Open and drop an encoder context; (the error or None, the options it did not use)."""
    options = dict(options)
    if codec == "libx265":
        # x265 prints its banner on every open: keep the throw-away open quiet.
        params = options.get("x265-params")
        options["x265-params"] = f"{params}:log-level=none" if params else "log-level=none"
    try:
        context = av.CodecContext.create(codec, "w")
        context.width, context.height = width, height
        context.pix_fmt = pix_fmt
        context.time_base = 1 / frame_rate
        context.framerate = frame_rate
        context.options = options
        context.open()
    except _OPEN_ERRORS as exc:
        return exc, {}
    unused = {key: value for key, value in dict(context.options).items() if key != "x265-params"}
    return None, unused


def check_encoder_options(codec: str, pix_fmt: str, width: int, height: int, frame_rate,
                          options: Mapping[str, str]) -> list[str]:
    """Open (and drop) the encoder ``codec`` with these settings, to refuse bad ones before any
    work is done.

    Args:
        codec: FFmpeg encoder name (libx264, libx265, ffv1...).
        pix_fmt: the pixel format it will encode (yuv420p...).
        width, height: the encoded frame size in pixels (after any padding to even sizes).
        frame_rate: frames per second (int, float or Fraction; its inverse is the time base).
        options: encoder options as FFmpeg strings, e.g. ``{"crf": "23", "preset": "fast"}``.

    Returns:
        The names of the options the encoder does not know and ignores (each logged as a
        warning: ``crf`` for ffv1, a misspelt name); empty when it took them all.

    Raises:
        OutputError: no such encoder, not a video encoder, or it refuses to open; when the
            encoder opens without the options, the message names the option(s) it refuses
            (``preset='bogus'``) and FFmpeg's reason.
    """
    encoder = find_encoder(codec)
    if encoder.type != "video":
        raise OutputError(f"encoder {codec!r} is an {encoder.type} encoder, not a video encoder")
    rate = _frame_rate(codec, frame_rate)
    options = {str(key): str(value) for key, value in options.items()}
    error, unused = _try_open(codec, pix_fmt, width, height, rate, options)
    if error is None:
        for key in unused:
            log.warning("encoder %s ignores option %s=%s (it has no such option)", codec, key,
                        unused[key])
        return sorted(unused)
    setup = f"{codec} ({pix_fmt}, {width}x{height} at {float(rate):g} fps)"
    if not options or _try_open(codec, pix_fmt, width, height, rate, {})[0] is not None:
        hint = NVENC_HINT if codec.endswith("_nvenc") else ""
        raise OutputError(f"cannot open encoder {setup}: {ffmpeg_reason(error)}{hint}")
    # It opens without the options: one (or more) of them is refused; find which, alone.
    refused = [key for key in options
               if len(options) == 1 or _try_open(codec, pix_fmt, width, height, rate,
                                                 {key: options[key]})[0] is not None]
    named = ", ".join(f"{key}={options[key]!r}" for key in refused) or \
        ", ".join(f"{key}={value!r}" for key, value in options.items())  # only together
    raise OutputError(f"encoder {setup} refuses option {named}: {ffmpeg_reason(error)}")


AHEAD_SIZE = (1280, 720)
"""The frame size a batch's encoder settings are tried at before its inputs are opened."""


def check_encoders_ahead(outputs: Iterable[str | os.PathLike],
                         sink_options: Mapping[str, Any]) -> None:
    """Refuse, before a batch opens an input, encoder settings none of its ``outputs`` could be
    written with; each output is still checked at its own size when it is opened.

    Args:
        outputs: the output paths (each's extension picks the encoder when ``codec`` is not given).
        sink_options: FileSink's encoder settings: ``codec``, ``pix_fmt``, ``crf``, ``preset``,
            ``bitrate`` (absent or None: the default).

    Raises:
        OutputError: FFmpeg has no such encoder, or no such video encoder; it cannot take
            ``pix_fmt``; or it opens at AHEAD_SIZE (1280x720, 30 fps) without the options but
            not with them (a bad ``preset``). An encoder that does not open there at all (dnxhd
            takes sizes of its own, NVENC needs its GPU) is left to each output's own check.
    """
    settings = {key: value for key, value in sink_options.items() if value is not None}
    for codec in sorted({settings.get("codec") or default_codec(output) for output in outputs}):
        encoder = find_encoder(codec)
        if settings.get("pix_fmt"):
            check_pix_fmt(codec, encoder, settings["pix_fmt"])
        pix_fmt = settings.get("pix_fmt") or default_pix_fmt(encoder, 8, warn=False)
        options = codec_options(codec, None, settings.get("crf"), settings.get("preset"),
                                settings.get("bitrate"))
        if encoder.type != "video":
            # raises: not a video encoder
            check_encoder_options(codec, pix_fmt, *AHEAD_SIZE, 30, options)
        opens = _try_open(codec, pix_fmt, *AHEAD_SIZE, Fraction(30), {})[0] is None
        if opens and _try_open(codec, pix_fmt, *AHEAD_SIZE, Fraction(30), options)[0] is not None:
            # raises, naming the option
            check_encoder_options(codec, pix_fmt, *AHEAD_SIZE, 30, options)


NVENC_ENCODERS = ("h264_nvenc", "hevc_nvenc", "av1_nvenc")
"""FFmpeg's encoders on NVIDIA's hardware encoder (NVENC), where the GPU and driver have one."""

NVENC_HINT = (" (NVENC, NVIDIA's hardware encoder, is not usable here: GPUs such as the H100 and "
              "H200 have none, and the driver must provide libnvidia-encode; a software encoder "
              "such as libx264 works everywhere)")


def hardware_encoders() -> dict[str, str | None]:
    """Each NVENC encoder in this FFmpeg build -> None if it opens here (a 256x256 yuv420p
    session), else FFmpeg's reason; encoders missing from the build are left out."""
    found = {}
    for codec in NVENC_ENCODERS:
        if codec not in av.codecs_available:
            continue
        error, _ = _try_open(codec, "yuv420p", 256, 256, Fraction(30), {})
        found[codec] = None if error is None else ffmpeg_reason(error)
    return found


def _frame_rate(codec: str, frame_rate) -> Fraction:
    """``frame_rate`` (int, float or Fraction) as FileSink takes it, so both open alike.

    Raises:
        OutputError: not a number, or not positive.
    """
    try:
        rate = Fraction(frame_rate)
        if isinstance(frame_rate, float):
            # The float 29.97 is a fraction over 2^45: more than FFmpeg's 32-bit rationals hold.
            rate = rate.limit_denominator(1001)
    except (TypeError, ValueError, OverflowError):
        raise OutputError(f"encoder {codec}: frame rate {frame_rate!r} is not a number") from None
    if rate <= 0:
        raise OutputError(f"encoder {codec}: frame rate must be positive, got {frame_rate!r}")
    return rate


def codec_options(codec: str, options: dict[str, str] | None, crf: float | None, preset: str | None,
                  bitrate: str | None) -> dict[str, str]:
    """The encoder's options: ``options``, with the quality (``crf``, or ``cq`` for NVENC), the
    preset and the bit rate (``b``) where given, and x264's threads kept quiet.

    Raises:
        OutputError: ``options`` no dict, ``crf`` no number, ``preset`` no string, ``bitrate``
            neither a string nor an int.
    """
    chosen = check_options(options, "options", OutputError)
    if crf is not None:
        quality = check_number(crf, "crf", OutputError)
        chosen["cq" if codec.endswith("_nvenc") else "crf"] = f"{quality:g}"
    if bitrate is not None:
        if not isinstance(bitrate, int) or isinstance(bitrate, bool):
            check_instance(bitrate, str, "bitrate", OutputError,
                           expected='bits per second ("8M", 2500000)')
        chosen["b"] = str(bitrate)
    if preset is not None:
        chosen["preset"] = check_instance(preset, str, "preset", OutputError,
                                          expected="a preset's name")
    return quiet_encoder_threads(codec, chosen)
