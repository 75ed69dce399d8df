"""``streamconv run --segments N``: one file cut at keyframes, filtered in N pieces at once and
joined (see :mod:`streamconv.jobs.segments`); its usage checks and its command."""

from __future__ import annotations

import argparse

from ..errors import run_exit_code
from ..io.spec import parse_output, parse_source
from ..jobs.segments import run_segments
from .run import _check_run_outputs, _report
from .settings import encode_settings, run_chain, run_settings

# The options a segmented run cannot honour, and why not in a word.
_REFUSED = (("max_frames", "--max-frames"), ("display", "--display"),
            ("side_by_side", "--side-by-side"),
            ("realtime", "--realtime"), ("reconnect", "--reconnect"), ("progress", "--progress"))


def check_segment_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of --segments, --devices and --ray (exit 2): a local file in, a file out, and
    none of the options that need one reader and one writer. Sets ``--device``'s default (0)
    once it is known whether it was given."""
    device_given, args.device = args.device is not None, 0 if args.device is None else args.device
    if args.segments is None:
        if args.devices is not None:
            parser.error("--devices spreads the segments of --segments N over GPUs; use --device "
                         "for one run")
        if args.ray is not None:
            parser.error("--ray runs the segments of --segments N as Ray tasks; a one-piece run "
                         "has none")
        return
    if args.ray is not None and (args.devices is not None or device_given):
        parser.error("--devices and --device do not apply with --ray (the cluster grants each "
                     "segment its GPU)")
    if not parse_source(args.source, format=args.input_format).is_local_file:
        parser.error(f"--segments cuts a video file at its keyframes, not {args.source!r}")
    if not parse_output(args.output, format=args.format).is_one_file:
        parser.error("--segments joins the segments into one output file: give -o FILE "
                     "(not a pipe, an image or image sequence, a URL or a virtual camera)")
    for name, option in _REFUSED:
        if getattr(args, name):
            parser.error(f"{option} does not apply with --segments (each segment is read and "
                         "written apart)")


def cmd_run_segments(args: argparse.Namespace) -> int:
    """``streamconv run IN -o OUT --segments N [--ray [ADDRESS]]``: run, report, and exit 0 (13
    if the input was damaged)."""
    stages, border = run_chain(args)
    _check_run_outputs(args, display=False)
    source_options = {"video_stream": args.video_stream, "hwaccel": args.hwaccel,
                      "input_options": dict(args.input_options)}
    stats = run_segments(args.source, stages, args.output, segments=args.segments,
                         devices=args.devices if args.devices is not None or args.ray
                         else [args.device],
                         settings=run_settings(args, border), encode=encode_settings(args),
                         copy_streams=not args.no_audio, overwrite=args.overwrite,
                         format=args.format,
                         muxer_options=dict(args.output_options), source_options=source_options,
                         ray=args.ray)
    code = run_exit_code(bool(stats.damage), None)
    _report(args, stats, code)
    return code
