"""``streamconv run``: build a Pipeline from the options, run it, report; usage checks argparse
cannot express."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from ..io.sinks.display import DisplaySink, check_display
from ..errors import StreamError, run_exit_code
from ..chain.filters import FilterStage
from ..io.sources.live import RealtimeSource
from ..run.pipeline import Pipeline
from ..run.settings import RunSettings
from ..chain.presets import list_presets, load_preset
from ..chain.resample import chain_shapes, pixel_stretch
from ..run.progressfile import ProgressFile, check_progress_target
from ..files.publish import check_output_path, without_file_scheme
from ..io.ffmpeg.formats import is_pipe, pipe_url
from ..io.sinks.targets import check_target
from ..io.open import open_sink, open_source
from ..io.sinks.sink import FanoutSink, Sink
from ..io.sources.source import Source
from ..io.spec import SourceSpec, parse_output, parse_source
from .options import refuse_empty
from .report import check_report_args, run_context, write_run_report
from .settings import encode_settings, encoder_names, run_chain, run_settings
from .several import check_several_sources, run_several
from .trim import check_trim_args


log = logging.getLogger("streamconv")


def cmd_run(args: argparse.Namespace) -> int:
    """``streamconv run``: validate everything cheap first, then run the pipeline."""
    stages, border = run_chain(args)
    settings = run_settings(args, border)
    display = args.display or args.side_by_side
    if len(args.sources) > 1:
        if display:
            check_display()  # before a camera or file is opened
        settings = settings.resolved()  # auto's notice once, not per source
        cycle = _filter_cycle(args, _chain_label(args), stages)
        return run_several(args, lambda own: _build_pipeline(own, stages, settings, False), cycle)
    _check_run_outputs(args, display)
    pipeline = _build_pipeline(args, stages, settings, display)
    try:
        stats = pipeline.run()
    except StreamError as exc:
        if pipeline.stats is not None and pipeline.stats.frames:
            # what was recorded before the input failed
            _report(args, pipeline.stats, exc.exit_code, exc)
        raise
    code = run_exit_code(bool(stats.damage), pipeline.stop_signal)
    _report(args, stats, code)
    return code


def _check_run_outputs(args: argparse.Namespace, display: bool) -> None:
    """Before any input is opened: a display to show on, and OUTPUT and --stats-json writable
    (new, or --overwrite) and none of the run's other files."""
    if display:
        check_display()  # before a camera or file is opened
    if parse_output(args.output, format=args.format).writes_a_file:
        check_target(args.output, overwrite=args.overwrite,
                     protect={"the input": args.source, **getattr(args, "chain_files", {})},
                     format=args.format, muxer_options=dict(args.output_options))
    if args.stats_json is not None:
        check_output_path(args.stats_json, overwrite=args.overwrite, what="--stats-json",
                          protect=_written_by_run(args, but="stats_json"))
    if args.progress is not None:
        check_progress_target(args.progress, overwrite=args.overwrite,
                              protect=_written_by_run(args, but="progress"))
    if args.report is not None:
        check_output_path(args.report, overwrite=args.overwrite, what="--report",
                          protect=_written_by_run(args, but="report"))


def _build_pipeline(args: argparse.Namespace, stages: list[FilterStage], settings: RunSettings,
                    display: bool) -> Pipeline:
    """Open SOURCE and the sinks and make the Pipeline; whatever was opened is released if a
    later step fails."""
    sink_options = {**encode_settings(args).sink_options(), "overwrite": args.overwrite,
                    "format": args.format, "muxer_options": dict(args.output_options)}
    settings = settings.resolved()  # once: auto's notice, and NVDEC's choice
    source = _open_run_source(args, settings)
    try:
        label = _chain_label(args)
        sink = _open_run_sink(args, source, display, _filter_cycle(args, label, stages),
                              sink_options)
        progress = None
        try:
            if args.progress is not None:
                progress = ProgressFile(args.progress, overwrite=args.overwrite,
                                        protect=_written_by_run(args, but="progress"))
            pipeline = Pipeline(source, stages, sink, settings=settings,
                                progress=not args.no_progress,
                                status=display or source.is_live, progress_file=progress)
        except BaseException:
            sink.abort()
            if progress is not None:
                progress.close()
            raise
    except BaseException:
        source.close()
        raise
    pipeline.filter_label = label
    return pipeline


def _open_run_source(args: argparse.Namespace, settings: RunSettings) -> Source:
    """The SOURCE with its options: camera settings for a webcam, the stream index for a file."""
    spec = parse_source(args.source, format=args.input_format)
    if spec.kind == "camera":
        width, height = args.size or (None, None)
        source = open_source(spec, width=width, height=height, fps=args.fps)
    else:
        copy = args.output is not None and not args.no_audio and not args.reconnect
        decoder = settings.decoder_to_open(hwaccel=bool(args.hwaccel), cut=args.trim is not None)
        demuxer = {"format": args.input_format, "size": args.size, "pix_fmt": args.input_pix_fmt,
                   "fps": args.fps} if spec.is_demuxed else {}
        source = open_source(spec, video_stream=args.video_stream, copy_streams=copy,
                             max_pixels=settings.max_pixels, timeout=args.timeout,
                             depth=settings.depth,
                             hwaccel=args.hwaccel, decoder=decoder, device=settings.device,
                             input_options=dict(args.input_options), reconnect=args.reconnect,
                             trim=args.trim, **_reconnect_timeout(args), **demuxer)
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
            shape = chain_shapes(cycle[0][1], source.shape)[-1]  # the chain asked for sizes it
            sinks.append(open_sink(args.output, like=source, shape=shape,
                                   stretch=pixel_stretch(cycle[0][1], source.shape),
                                   **sink_options))
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
    # "-": standard output's file
    output = None if args.output is None else pipe_url(args.output, 1)
    named = {"source": ("the input", args.source), "output": ("the output", output),
             "stats_json": ("--stats-json", args.stats_json),
             "progress": ("--progress", args.progress), "report": ("--report", args.report)}
    written = {role: value for key, (role, value) in named.items()
               if key != but and value is not None}
    return {**written, **getattr(args, "chain_files", {})}  # taps files the chain read


def _report(args: argparse.Namespace, stats, exit_code: int,
            error: Exception | None = None) -> None:
    """Write --stats-json (whole or not at all; the run's exit code and error first, as a
    record of several sources has them, then where it ran) and --report (the page of that
    record), and print the summary table (unless --quiet)."""
    outcome = {"exit_code": exit_code, "error": None if error is None else str(error)}
    if args.stats_json or args.report:
        outcome |= {"source": args.source, "output": args.output, **run_context(args)}
    if args.stats_json:
        stats.write_json(args.stats_json, overwrite=args.overwrite, what="--stats-json",
                         protect=_written_by_run(args, but="stats_json"), outcome=outcome)
    if args.report:
        write_run_report(args, {**outcome, **stats.to_dict()},
                         protect=_written_by_run(args, but="report"))
    if not args.quiet:
        print(stats.format_table(), file=sys.stderr)


def check_run_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                   extra: list[str] = ()) -> None:
    """Usage errors argparse cannot express (exit 2, with run's usage); ``extra``: the arguments
    argparse did not take. Settles ``args.source`` (the positional SOURCE or ``-i``)."""
    _check_source_args(parser, args, extra)
    refuse_empty(parser, [*((spec, "SOURCE") for spec in args.sources), (args.output, "--output"),
                          (args.pipeline, "--pipeline"), (args.stats_json, "--stats-json"),
                          (args.hwaccel, "--hwaccel"), *encoder_names(args)])
    for name in ("output", "stats_json", "progress"):  # checked and written as the file each names
        if getattr(args, name) is not None:
            setattr(args, name, without_file_scheme(getattr(args, name)))
    # else it would make a file named "-"
    if args.stats_json is not None and is_pipe(args.stats_json):
        parser.error("--stats-json names a file, not standard output (which carries -o - and "
                     "--progress -); "
                     "a file named - is ./-")
    if args.max_frames == 0 and args.output is not None:
        parser.error("--max-frames 0 writes no frame, and an output file needs at least one")
    _check_terminal_pipes(parser, args)
    check_trim_args(parser, args)
    check_report_args(parser, args)
    for spec in args.sources:  # every check of SOURCE holds for each of several
        args.source = spec
        _check_source_spec(parser, args)
    args.source = args.sources[0]


def _check_terminal_pipes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A pipe that is a terminal: video written there floods it with binary, and one read from
    there waits for a stream to be typed."""
    if args.output is not None and is_pipe(args.output) and _is_terminal(pipe_url(args.output, 1)):
        parser.error(f"-o {args.output}: that is a terminal, and video written there is binary "
                     "noise; "
                     "redirect it (> out.mkv, | ffplay -) or name a file")
    for spec in args.sources:
        if is_pipe(spec) and _is_terminal(pipe_url(spec, 0)):
            parser.error(f"SOURCE {spec}: that is a terminal, not a video stream; "
                         "pipe one in (... | streamconv run - ...) or name a file")


def _is_terminal(url: str) -> bool:
    """Whether the pipe ``pipe:N`` (or ``pipe:``: not a number, never) is a terminal."""
    number = url.removeprefix("pipe:")
    return number.isdigit() and os.isatty(int(number))


def _check_source_spec(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage errors of SOURCE (``args.source``) with the input options given."""
    spec = parse_source(args.source, format=args.input_format)
    _check_format_args(parser, args, spec)
    if args.hwaccel and not spec.decodes_a_stream:
        parser.error(f"--hwaccel applies to video files and streams, not to {args.source!r}")
    if args.hwaccel and args.decoder == "nvdec":
        parser.error("--hwaccel is FFmpeg's hardware decoding, --decoder nvdec is NVDEC's own: "
                     "choose one")
    if args.decoder == "nvdec" and not spec.decodes_a_stream:
        parser.error(f"--decoder nvdec applies to video files and streams, not to {args.source!r}")
    _check_network_args(parser, args, spec)


def _check_network_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                        spec: SourceSpec) -> None:
    """--input-option and --reconnect need a file or URL input; the output's options an output."""
    if args.input_options and not spec.decodes_a_stream:
        parser.error(f"--input-option applies to video files and streams, not to {args.source!r}")
    if (args.reconnect or args.reconnect_timeout is not None) and not spec.is_url:
        parser.error("--reconnect and --reconnect-timeout apply to URL inputs (rtsp://, srt://, "
                     "...), "
                     f"not to {args.source!r}")
    if args.reconnect_timeout is not None and not args.reconnect:
        parser.error("--reconnect-timeout applies with --reconnect")
    if args.output_options and args.output is None:
        parser.error("--output-option and --format apply to an output (-o)")
    if (args.output_options or args.format) and parse_output(args.output).kind == "vcam":
        parser.error("--output-option and --format do not apply to a virtual camera (-o vcam)")


def _check_source_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                       extra: list[str]) -> None:
    """SOURCE, positional or ``-i``, and any more SOURCEs; settles ``args.sources`` and
    ``args.source`` (the first). A second name is never taken as OUTPUT (a glob such as ``*.mp4``
    would then replace a file with --overwrite): several are refused unless
    :func:`check_several_sources` takes them."""
    unknown = [arg for arg in extra if arg.startswith("-") and arg != "-"]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    sources = [spec for spec in (args.input_spec, args.source, *extra) if spec is not None]
    if not sources:
        parser.error("SOURCE is missing: streamconv run SOURCE [-o OUTPUT] (or -i SOURCE)")
    if len(sources) > 1:
        check_several_sources(parser, args, sources)
    args.sources, args.source = sources, sources[0]


def _is_standard_output(path: str) -> bool:
    """Whether ``path`` opens this process's standard output (``/dev/stdout``, ``/dev/fd/1``)."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(1))
    except (OSError, ValueError):
        return False


def _check_format_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                       spec: SourceSpec) -> None:
    """--format belongs to OUTPUT, --input-format and its --size, --input-pix-fmt, --fps to SOURCE;
    standard output carries one thing."""
    if args.format is not None and args.output is None:
        parser.error("--format names OUTPUT's container, and there is no -o OUTPUT "
                     "(--input-format names SOURCE's)")
    if args.output is not None and pipe_url(args.output, 1) == "pipe:1" and \
            args.progress is not None \
            and (is_pipe(args.progress) or _is_standard_output(args.progress)):
        parser.error("-o - and --progress - would both write to standard output: give --progress a "
                     "file")
    if args.input_format is not None and not spec.decodes_a_stream:
        parser.error(f"--input-format applies to files, pipes and URLs, not to {args.source!r}")
    raw = args.input_format == "rawvideo"
    if raw and args.size is None:
        parser.error("--input-format rawvideo needs the frames' --size WxH (raw video has no "
                     "header)")
    if args.input_pix_fmt is not None and not raw:
        parser.error("--input-pix-fmt is the pixel format of --input-format rawvideo frames")
    if (args.size and not spec.takes_size) or (args.fps and not spec.takes_rate):
        parser.error("--size and --fps apply to cameras (webcam, webcam:N, /dev/videoN) and raw "
                     "video "
                     "(--input-format rawvideo), --fps also to image sequences; not to "
                     f"{args.source!r}")
