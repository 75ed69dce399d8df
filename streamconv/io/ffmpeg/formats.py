"""Which container and encoder an output gets, and what kind of output it is.

An output is a file (its extension names the container), standard output or another pipe
(``-``, ``pipe:1``: a streamable container, Matroska unless ``format`` names another), or an
image sequence (``out%03d.png``: FFmpeg's image2 muxer, one file a frame). ``format`` (the
CLI's ``--format``, FFmpeg's ``-f``) names the container outright. The encoder, when none is
asked for, follows the container or the images' extension; an explicit codec always wins.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ...files.numbered import is_pattern

STREAM_FORMAT = "matroska"
"""The container written to a pipe when no ``format`` is given: Matroska holds every codec
streamconv writes and the audio and subtitles it copies, keeps the timestamps, and needs no
seeking back (its index is left out on a pipe); players (ffplay, mpv, VLC) read it from stdin."""

CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm",
              ".avi": "avi", ".ts": "mpegts", ".nut": "nut"}
"""Containers by extension; FFmpeg guesses the others from the name."""

IMAGE_CODECS = {".png": "png", ".jpg": "mjpeg", ".jpeg": "mjpeg", ".bmp": "bmp", ".tif": "tiff",
                ".tiff": "tiff", ".ppm": "ppm", ".webp": "libwebp", ".tga": "targa", ".pgm": "pgm",
                ".pbm": "pbm", ".pam": "pam", ".sgi": "sgi", ".xwd": "xwd", ".dpx": "dpx",
                ".qoi": "qoi",
                ".jp2": "jpeg2000", ".j2k": "jpeg2000", ".hdr": "hdr", ".pcx": "pcx", ".pfm": "pfm",
                ".exr": "exr", ".ras": "sunrast", ".sun": "sunrast"}
"""The encoder of an image file (or sequence) by extension (FFmpeg's image2 muxer's names)."""

CONTAINER_CODECS = {".webm": "libvpx-vp9", ".gif": "gif", **IMAGE_CODECS}
"""The encoder a file gets when none is asked for, by extension (libx264 for the others)."""

NETWORK_CONTAINERS = {"rtmp": "flv", "rtmps": "flv", "rtsp": "rtsp", "srt": "mpegts",
                      "udp": "mpegts", "tcp": "mpegts"}
"""The container each network scheme is written in when none is asked for: the schemes
streamconv sends to."""

FORMAT_CODECS = {"webm": "libvpx-vp9", "gif": "gif", "rawvideo": "rawvideo", "image2pipe": "png",
                 "mjpeg": "mjpeg", "apng": "apng"}
"""The encoder a container named by ``format`` gets when none is asked for."""


_URL_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)


def url_scheme(spec: str | os.PathLike | None) -> str | None:
    """The scheme of a URL spec (``"rtmp"`` for ``RTMP://host/app``), lower case; None for a
    path (a Path object is always one) or None."""
    match = _URL_SCHEME.match(spec) if isinstance(spec, str) else None
    return match[1].lower() if match else None


def is_pipe(spec: str | os.PathLike) -> bool:
    """Whether ``spec`` names a pipe: ``-`` (standard input or output) or FFmpeg's ``pipe:N``."""
    text = os.fspath(spec)
    return text == "-" or text.startswith("pipe:")


def pipe_url(spec: str | os.PathLike, fd: int) -> str:
    """The FFmpeg URL of a pipe spec: ``-`` and ``pipe:`` are ``pipe:FD`` (0 for input, 1 for
    output)."""
    text = os.fspath(spec)
    return f"pipe:{fd}" if text in ("-", "pipe:") else text


def is_image_output(spec: str | os.PathLike, format: str | None = None) -> bool:
    """Whether ``spec`` names image files rather than a container: ``format`` image2, or an image
    extension and no other ``format`` (a sequence ``img%04d.png`` or one image ``still.png``);
    never a pipe or a URL."""
    text = os.fspath(spec)
    if format not in (None, "image2") or is_pipe(text) or "://" in text:
        return False
    return format == "image2" or Path(text).suffix.lower() in IMAGE_CODECS


def is_sequence(spec: str | os.PathLike, format: str | None = None) -> bool:
    """Whether ``spec`` is an image sequence: a pattern (``img%04d.png``) with an image extension
    and no other ``format``, or any pattern with ``format`` image2."""
    return is_pattern(spec) and is_image_output(spec, format)


def output_format(spec: str | os.PathLike, format: str | None = None) -> str | None:
    """The container an output is written in: ``format`` if given, image2 for a sequence,
    STREAM_FORMAT for a pipe, else by extension (None: FFmpeg guesses from the name)."""
    if format is not None:
        return format
    if is_pipe(spec):
        return STREAM_FORMAT
    if is_image_output(spec):
        return "image2"
    return CONTAINERS.get(Path(spec).suffix.lower())


def default_codec(spec: str | os.PathLike, format: str | None = None) -> str:
    """The encoder of an output when none is asked for: the one its container (``format``) or
    extension needs (VP9 for WebM, which holds no H.264; gif for .gif; png, mjpeg... for
    images), else libx264."""
    if format in FORMAT_CODECS:
        return FORMAT_CODECS[format]
    if is_pipe(spec):
        return "libx264"
    return CONTAINER_CODECS.get(Path(spec).suffix.lower(), "libx264")
