"""The command's option types: each turns one option's text into its value, or raises
argparse.ArgumentTypeError saying what was expected (a usage error, exit 2)."""

from __future__ import annotations

import argparse
import math
import re

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av

from ..chain.filters import REGISTRY
from ..frames.checks import MAX_RING
from ..io.ffmpeg.container import MAX_TIMEOUT


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def frame_size(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)[xX](\d+)", text.strip())
    if not match or int(match[1]) < 1 or int(match[2]) < 1:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1280x720, got {text!r}")
    return int(match[1]), int(match[2])


def ring_size(text: str) -> int:
    """--ring: 1 to MAX_RING slots (each two host frames: the cap keeps a typo from taking all
    memory)."""
    value = int(text)
    if not 1 <= value <= MAX_RING:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_RING}, got {value}")
    return value


def finite_float(text: str) -> float:
    """A float that is a number: nan, inf and 1e400 (inf) are refused here, not by FFmpeg later."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def timeout_seconds(text: str) -> float:
    value = finite_float(text)
    if not 0 <= value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_TIMEOUT:g} seconds (0: wait forever), "
                                         f"got {text}")
    return value


def crf_value(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def device_list(text: str) -> str | list[int]:
    """--devices: ``all`` or GPU numbers separated by commas (``0,1``)."""
    if text.strip() == "all":
        return "all"
    try:
        devices = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected all or GPU numbers such as 0,1, got "
                                         f"{text!r}") from None
    if any(d < 0 for d in devices) or len(set(devices)) != len(devices):
        raise argparse.ArgumentTypeError(f"expected distinct GPU numbers >= 0, got {text!r}")
    return devices


def bit_rate(text: str) -> str:
    """--bitrate: bits per second, as FFmpeg writes them (2500000, 2500k, 2.5M)."""
    # FFmpeg reads ASCII digits only
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)([kKmMgG]?)\s*", text, re.ASCII)
    if not match or float(match[1]) <= 0:
        raise argparse.ArgumentTypeError("expected bits per second such as 8M, 2500k or 800000, "
                                         f"got {text!r}")
    return f"{match[1]}{match[2]}"


def positive_float(text: str) -> float:
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def pixel_limit(text: str) -> int | None:
    """--max-pixels: a count (8294400), a size (3840x2160), or a plain 0 for no limit."""
    match = re.fullmatch(r"\s*(\d+)(?:[xX](\d+))?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a pixel count or WIDTHxHEIGHT, got {text!r}")
    if match[2] is None:
        return int(match[1]) or None
    value = int(match[1]) * int(match[2])
    if value == 0:  # 0x5 is a size of nothing, not a request for no limit
        raise argparse.ArgumentTypeError(f"a size must be at least 1x1, got {text!r} "
                                         "(a plain 0 means no limit)")
    return value


def ffmpeg_option(text: str) -> tuple[str, str]:
    """--input-option, --output-option: KEY=VALUE, an FFmpeg option's name and its value."""
    match = re.fullmatch(r"([A-Za-z0-9_][A-Za-z0-9_.:-]*)=(.*)", text, re.DOTALL)
    if not match or not match[2].strip() or match[2].strip() != match[2]:
        raise argparse.ArgumentTypeError("expected KEY=VALUE such as rtsp_transport=tcp, got "
                                         f"{text!r}")
    return match[1], match[2]


def preset_name(text: str) -> str:
    """--preset: an encoder preset's name (ultrafast, p4, 8...), at most 32 letters, digits, ``-``,
    ``_`` or ``.``; whether the encoder has it is checked when the output is opened. Anything else
    is refused here: x264 prints a preset it does not know on stderr itself, whole, twice. Blank
    text is left to the "is empty" check."""
    if text.strip() and not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"expected an encoder preset's name (at most 32 letters, "
                                         "digits, '-', '_' or '.', such as veryfast), got "
                                         f"{text!r}")
    return text


def pixel_format(text: str) -> str:
    """--pix-fmt, --input-pix-fmt: a pixel format FFmpeg knows (whether the encoder takes it is
    checked when the output is opened). Blank text is left to the "is empty" check."""
    if text.strip():
        try:
            av.VideoFormat(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"unknown pixel format {text!r} (see `ffmpeg "
                                             "-pix_fmts`)") from None
    return text


OWN_FILES_MUXERS = {"image2", "rtsp"}
"""Muxers that open their own files (FFmpeg's AVFMT_NOFILE) which streamconv writes through:
image sequences (streamconv.io.sinks.sequence) and RTSP (streamconv.io.sinks.network)."""


def container_format(mode: str):
    """An argparse type for --format (``mode`` "w": a muxer) or --input-format ("r": a demuxer)."""
    kind = "muxer" if mode == "w" else "demuxer"

    def convert(text: str) -> str:
        try:
            found = av.ContainerFormat(text, mode)
        except ValueError:
            hint = _filter_named(text) if mode == "w" else ""
            raise argparse.ArgumentTypeError(
                f"FFmpeg has no {kind} {text!r} (see `ffmpeg -formats`){hint}") from None
        if mode == "w" and found.no_file and found.name not in OWN_FILES_MUXERS:
            raise argparse.ArgumentTypeError(
                f"{text} writes no OUTPUT file (files or devices of its own, or nothing), so it "
                "could be neither "
                "published whole nor taken back: write one container (mpegts, matroska...) and "
                "split it after, "
                "or leave out -o to discard the frames")
        return text
    convert.__name__ = f"container_format_{mode}"
    return convert


def _filter_named(text: str) -> str:
    """A hint where ``-f``'s value names a filter: -f was streamconv's --filter before it became
    OUTPUT's format, as in FFmpeg."""
    if text.partition(":")[0].strip().lower() not in REGISTRY:
        return ""
    return f"; -f is OUTPUT's format, as in FFmpeg: a filter is --filter {text} or -vf {text}"


def refuse_empty(parser: argparse.ArgumentParser, named: list[tuple[str | None, str]]) -> None:
    """A usage error (exit 2) for the first of ``named`` (value, option name) pairs whose value is
    given but blank: an empty name would otherwise mean the current folder ('' is '.'), or be
    taken for the option left out (the default encoder)."""
    for value, name in named:
        if value is not None and not value.strip():
            parser.error(f"{name} is empty")


def argument_type(parse):
    """An argparse type from a parser that raises ValueError with a message of its own."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert
