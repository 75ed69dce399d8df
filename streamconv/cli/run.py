"""``streamconv run``: build a Pipeline from the options, run it, report; usage checks argparse cannot express."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ..borders import DEFAULT_BORDER
from ..io.display import DisplaySink, check_display
from ..errors import EXIT_DAMAGED_INPUT, CameraLostError, InputLostError
from ..filters import FilterStage, parse_chain
from ..io.live import RealtimeSource
from ..backends import resolve_backend
from ..pipeline import Pipeline, choose_decoder
from ..presets import list_presets, load_preset
from ..publish import check_output_path
from ..io.netsink import is_network_output
from ..io.open import open_sink, open_source, writes_a_file
from ..io.sink import FanoutSink, Sink
from ..io.pattern import is_test_spec
from ..io.source import Source
from ..io.camera import is_webcam_spec


log = logging.getLogger("streamconv")


def cmd_run(args: argparse.Namespace) -> int:
    """``streamconv run``: validate everything cheap first, then run the pipeline."""
    stages, border = _run_chain(args)
    display = args.display or args.side_by_side
    _check_run_outputs(args, display)
    pipeline = _build_pipeline(args, stages, border, display)
    try:
        stats = pipeline.run()
    except (CameraLostError, InputLostError):
        if pipeline.stats is not None and pipeline.stats.frames:
            _report(args, pipeline.stats)  # what was recorded before the camera or stream went away
        raise
    _report(args, stats)
    if pipeline.stop_signal is not None:
        return 128 + pipeline.stop_signal
    return EXIT_DAMAGED_INPUT if stats.damage else 0


def _run_chain(args: argparse.Namespace) -> tuple[list[FilterStage], str]:
    """The stages (the --pipeline preset's, then the --filter specs) and the border mode."""
    border = args.border
    stages = []
    if args.pipeline:
        preset = load_preset(args.pipeline)
        stages.extend(preset.filters)
        border = border or preset.border
    stages.extend(parse_chain(args.filters))
    border = border or DEFAULT_BORDER
    if not stages:
        log.warning("no --filter or --pipeline given: frames pass through unchanged")
    return stages, border


def _check_run_outputs(args: argparse.Namespace, display: bool) -> None:
    """Before any input is opened: a display to show on, and OUTPUT and --stats-json writable
    (new, or --overwrite) and none of the run's other files."""
    if display:
        check_display()  # before a camera or file is opened
    if args.output is not None and writes_a_file(args.output):
        check_output_path(args.output, overwrite=args.overwrite, protect=(args.source,))
    if args.stats_json is not None:
        check_output_path(args.stats_json, overwrite=args.overwrite, what="--stats-json",
                          protect=_written_by_run(args, but="stats_json"))


def _build_pipeline(args: argparse.Namespace, stages: list[FilterStage], border: str,
                    display: bool) -> Pipeline:
    """Open SOURCE and the sinks and make the Pipeline; whatever was opened is released if a
    later step fails."""
    sink_options = {"codec": args.codec, "pix_fmt": args.pix_fmt, "crf": args.crf, "bitrate": args.bitrate,
                    "preset": args.codec_preset, "overwrite": args.overwrite, "container": args.output_format,
                    "muxer_options": dict(args.output_options)}
    args.backend = resolve_backend(args.backend, device=args.device)  # once: auto's notice, and NVDEC's choice
    source = _open_run_source(args)
    try:
        label = _chain_label(args)
        sink = _open_run_sink(args, source, display, _filter_cycle(args, label, stages), sink_options)
        try:
            pipeline = Pipeline(source, stages, sink, backend=args.backend, border=border,
                                ring=args.ring, max_frames=args.max_frames, device=args.device,
                                kernel=args.kernel, colour=args.colour, max_pixels=args.max_pixels,
                                progress=not args.no_progress, status=display or source.is_live)
        except BaseException:
            sink.abort()
            raise
    except BaseException:
        source.close()
        raise
    pipeline.filter_label = label
    return pipeline


def _open_run_source(args: argparse.Namespace) -> Source:
    """The SOURCE with its options: camera settings for a webcam, the stream index for a file."""
    if is_webcam_spec(args.source):
        width, height = args.size or (None, None)
        source = open_source(args.source, width=width, height=height, fps=args.fps)
    else:
        copy = args.output is not None and not args.no_audio and not args.reconnect
        decoder = "cpu" if args.hwaccel else choose_decoder(args.decoder, args.backend)
        source = open_source(args.source, video_stream=args.video_stream, copy_streams=copy,
                             max_pixels=args.max_pixels, timeout=args.timeout,
                             depth=None if args.depth == "auto" else int(args.depth), hwaccel=args.hwaccel,
                             decoder=decoder, device=args.device, input_options=dict(args.input_options),
                             reconnect=args.reconnect, **_reconnect_timeout(args))
    if args.realtime and not source.is_live:
        source = RealtimeSource(source)
    return source


def _reconnect_timeout(args: argparse.Namespace) -> dict:
    """--reconnect-timeout as open_source takes it (left out: its default)."""
    return {} if args.reconnect_timeout is None else {"reconnect_timeout": args.reconnect_timeout}


def _open_run_sink(args: argparse.Namespace, source: Source, display: bool,
                   cycle: list[tuple[str, list[FilterStage]]], sink_options: dict) -> Sink:
    """The window, the file, both (display first, so recording adds no display latency), or null."""
    sinks: list[Sink] = []
    try:
        if display:
            title = f"streamconv: {args.source}"
            sinks.append(DisplaySink(title=title, side_by_side=args.side_by_side,
                                     overlay=not args.no_overlay, filter_cycle=cycle))
        if args.output is not None:
            sinks.append(open_sink(args.output, like=source, **sink_options))
    except BaseException:
        for sink in sinks:
            sink.abort()
        raise
    if not sinks:
        return open_sink(None)
    return sinks[0] if len(sinks) == 1 else FanoutSink(sinks)


def _chain_label(args: argparse.Namespace) -> str:
    """A short name of the chain asked for: the preset and the --filter specs."""
    parts = [Path(args.pipeline).stem] if args.pipeline else []
    parts += [spec if isinstance(spec, str) else spec.describe() for spec in args.filters]
    return " + ".join(parts) or "none"


def _filter_cycle(args: argparse.Namespace, label: str,
                  stages: list[FilterStage]) -> list[tuple[str, list[FilterStage]]]:
    """What the window's f key steps through: the chain asked for, every preset, then no filter."""
    cycle = [(label, list(stages))]
    for name in list_presets():
        if name != label:
            cycle.append((name, list(load_preset(name).filters)))
    if stages:
        cycle.append(("none", []))
    return cycle


def _written_by_run(args: argparse.Namespace, *, but: str) -> dict[str, str]:
    """The files a run reads or writes other than option ``but``'s, by role: a report must be
    none of them."""
    named = {"source": ("the input", args.source), "output": ("the output", args.output),
             "stats_json": ("--stats-json", args.stats_json)}
    return {role: value for key, (role, value) in named.items() if key != but and value is not None}


def _report(args: argparse.Namespace, stats) -> None:
    """Write --stats-json (whole or not at all) and print the summary table (unless --quiet)."""
    if args.stats_json:
        stats.write_json(args.stats_json, overwrite=args.overwrite, what="--stats-json",
                         protect=_written_by_run(args, but="stats_json"))
    if not args.quiet:
        print(stats.format_table(), file=sys.stderr)


def check_run_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors argparse cannot express (exit 2)."""
    # An empty name would otherwise mean the current folder ('' -> '.') or be skipped as absent.
    for value, name in ((args.source, "SOURCE"), (args.output, "--output"), (args.pipeline, "--pipeline"),
                        (args.stats_json, "--stats-json"), (args.hwaccel, "--hwaccel"), (args.codec, "--codec"),
                        (args.pix_fmt, "--pix-fmt"), (args.codec_preset, "--preset")):
        if value is not None and not value.strip():
            parser.error(f"{name} is empty")
    if args.max_frames == 0 and args.output is not None:
        parser.error("--max-frames 0 writes no frame, and an output file needs at least one")
    if (args.size or args.fps) and not is_webcam_spec(args.source):
        parser.error(f"--size and --fps apply to cameras (webcam, webcam:N, /dev/videoN), "
                     f"not to {args.source!r}")
    if args.hwaccel and (is_webcam_spec(args.source) or is_test_spec(args.source)):
        parser.error(f"--hwaccel applies to video files and streams, not to {args.source!r}")
    if args.hwaccel and args.decoder == "nvdec":
        parser.error("--hwaccel is FFmpeg's hardware decoding, --decoder nvdec is NVDEC's own: choose one")
    if args.decoder == "nvdec" and (is_webcam_spec(args.source) or is_test_spec(args.source)):
        parser.error(f"--decoder nvdec applies to video files and streams, not to {args.source!r}")
    _check_network_args(parser, args)


def _check_network_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--input-option and --reconnect need a file or URL input; the output's options an output."""
    named = is_webcam_spec(args.source) or is_test_spec(args.source)
    if args.input_options and named:
        parser.error(f"--input-option applies to video files and streams, not to {args.source!r}")
    if (args.reconnect or args.reconnect_timeout is not None) and "://" not in args.source:
        parser.error(f"--reconnect and --reconnect-timeout apply to URL inputs (rtsp://, srt://, ...), "
                     f"not to {args.source!r}")
    if args.reconnect_timeout is not None and not args.reconnect:
        parser.error("--reconnect-timeout applies with --reconnect")
    if (args.output_options or args.output_format) and args.output is None:
        parser.error("--output-option and --output-format apply to an output (-o)")
    if (args.output_options or args.output_format) and not writes_a_file(args.output) and \
            not is_network_output(args.output):
        parser.error("--output-option and --output-format do not apply to a virtual camera (-o vcam)")
    if args.output_format is not None and not args.output_format.strip():
        parser.error("--output-format is empty")
