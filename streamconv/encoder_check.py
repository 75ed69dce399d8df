"""Check encoder settings before a run starts: a bad ``--preset`` or ``--crf`` is refused up
front (exit 6), not at the first frame after the source was opened and the pipeline started.

PyAV opens an encoder only when the first frame is encoded. :func:`check_encoder_options`
opens a throw-away one with the same settings at once (a few milliseconds: libx264 at
3840x2160 opens in about 3 ms, 18 ms with ``preset=veryslow``), and names the option it refuses.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Mapping

import av

from .errors import OutputError
from .ffmpeglog import ffmpeg_reason

log = logging.getLogger(__name__)

_OPEN_ERRORS = (av.FFmpegError, ValueError, OverflowError, TypeError, OSError)
"""What opening a PyAV codec context raises for settings it refuses (ArgumentError, ERANGE as
OverflowError, a missing device as PermissionError...)."""


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
    try:
        encoder = av.codec.Codec(codec, "w")
    except (av.FFmpegError, ValueError):
        raise OutputError(f"unknown encoder {codec!r} (see `ffmpeg -encoders`)") from None
    if encoder.type != "video":
        raise OutputError(f"encoder {codec!r} is an {encoder.type} encoder, not a video encoder")
    try:
        rate = Fraction(frame_rate)  # as FileSink takes it, so both open alike
        if isinstance(frame_rate, float):
            # The float 29.97 is a fraction over 2^45: more than FFmpeg's 32-bit rationals hold.
            rate = rate.limit_denominator(1001)
    except (TypeError, ValueError, OverflowError):
        raise OutputError(f"encoder {codec}: frame rate {frame_rate!r} is not a number") from None
    if rate <= 0:
        raise OutputError(f"encoder {codec}: frame rate must be positive, got {frame_rate!r}")
    options = {str(key): str(value) for key, value in options.items()}
    error, unused = _try_open(codec, pix_fmt, width, height, rate, options)
    if error is None:
        for key in unused:
            log.warning("encoder %s ignores option %s=%s (it has no such option)", codec, key, unused[key])
        return sorted(unused)
    setup = f"{codec} ({pix_fmt}, {width}x{height} at {float(rate):g} fps)"
    if not options or _try_open(codec, pix_fmt, width, height, rate, {})[0] is not None:
        raise OutputError(f"cannot open encoder {setup}: {ffmpeg_reason(error)}")
    # It opens without the options: one (or more) of them is refused; find which, alone.
    refused = [key for key in options
               if len(options) == 1 or _try_open(codec, pix_fmt, width, height, rate,
                                                 {key: options[key]})[0] is not None]
    named = ", ".join(f"{key}={options[key]!r}" for key in refused) or \
        ", ".join(f"{key}={value!r}" for key, value in options.items())  # only together
    raise OutputError(f"encoder {setup} refuses option {named}: {ffmpeg_reason(error)}")
