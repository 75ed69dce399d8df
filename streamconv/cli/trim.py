"""``run -ss``, ``-t`` and ``-to``: FFmpeg's cut of SOURCE, declared, checked and made a Trim."""

from __future__ import annotations

import argparse

from ..io.sources.trim import Trim, parse_time
from ..io.spec import parse_source
from .options import argument_type

_TIME = argument_type(parse_time)


def add_trim_options(group) -> None:
    """-ss, -t and -to, as FFmpeg's options before -i."""
    group.add_argument("-ss", dest="start", type=_TIME, metavar="TIME",
                       help="start at this time of SOURCE (90, 1.5, 500ms, 01:30, 1:02:03.5): "
                            "decoded from the keyframe before it, every frame before it dropped, "
                            "timestamps from 0 there and copied audio from where the seek lands, "
                            "as ffmpeg -ss TIME -i SOURCE cuts with the video re-encoded")
    group.add_argument("-t", dest="duration", type=_TIME, metavar="DURATION",
                       help="read this much of SOURCE: its video up to DURATION after the first "
                            "frame kept, its copied audio up to DURATION (ffmpeg's -t before -i)")
    group.add_argument("-to", dest="stop", type=_TIME, metavar="TIME",
                       help="read SOURCE up to this time of it (-t TIME minus -ss; not with -t)")


def check_trim_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of -ss, -t and -to (exit 2); sets ``args.trim`` (a Trim, or None)."""
    try:
        args.trim = Trim.of(args.start, args.duration, args.stop)
    except ValueError as exc:
        parser.error(str(exc))
    if args.trim is None:
        return
    for spec in args.sources:
        if not parse_source(spec).decodes_a_stream:
            parser.error(f"-ss, -t and -to cut video files and streams, not {spec!r}")
    if args.reconnect:
        parser.error("-ss, -t and -to cut an input read once: not with --reconnect")
    if args.segments is not None:
        parser.error("-ss, -t and -to cut one run: not with --segments")
    if args.decoder == "nvdec":
        parser.error("-ss, -t and -to decode on the CPU: not with --decoder nvdec")
