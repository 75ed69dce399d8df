"""The ``streamconv`` command: argument parsing, building a Pipeline, mapping errors to exit codes.

Exit codes: 0 success (also after q, Esc or closing the window); 1 internal error; 2 usage;
3 bad filter spec, preset or frame; 4 input missing or undecodable; 5 no video stream;
6 output refused or not writable; 7 backend unavailable; 8 decode/encode failure during the
run; 9 camera cannot be opened; 10 camera stopped delivering and could not be reopened;
11 no display for --display; 12 GPU fault during the run; 13 finished, but the input was
damaged; 130 Ctrl-C (SIGINT); 143 SIGTERM. docs/reliability.md has the table of cases.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .backends import BACKENDS, cuda_status
from .backends.plan import KERNEL_CHOICES
from .borders import BORDER_MODES, DEFAULT_BORDER
from .cli_bench import add_bench_parser, cmd_bench
from .cli_types import (MAX_TIMEOUT, crf_value, frame_size, non_negative_int, pixel_limit, positive_float,
                        ring_size, timeout_seconds)
from .io.display import KEYS_HELP, DisplaySink, check_display
from .errors import EXIT_DAMAGED_INPUT, EXIT_INTERRUPTED, CameraLostError, StreamconvError
from .io.file import NETWORK_TIMEOUT
from .filters import FilterStage, describe_registry, parse_chain
from .frames import DEFAULT_MAX_PIXELS, MAX_RING
from .io.live import RealtimeSource
from .pipeline import COLOUR_PATHS, Pipeline
from .presets import list_presets, load_preset
from .interrupts import SignalGuard
from .publish import check_output_path, write_atomically
from .io.open import open_sink, open_source
from .io.sink import FanoutSink, Sink
from .io.pattern import is_test_spec
from .io.source import Source
from .io.camera import is_webcam_spec

log = logging.getLogger("streamconv")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="streamconv",
        description="Filter video files and streams with 2D convolution on an NVIDIA GPU "
                    "(or the CPU reference backend).")
    parser.add_argument("--version", action="version", version=f"streamconv {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run_parser(commands)
    commands.add_parser("filters", help="list filters, their parameters and the presets")
    commands.add_parser("info", help="versions, and which backends can run here and why not")
    add_bench_parser(commands)
    return parser


def _add_run_parser(commands) -> None:
    """Add ``streamconv run``: SOURCE and OUTPUT, then its options group by group (the order
    they are added in is the order of the usage line and of --help)."""
    run = commands.add_parser(
        "run", help="filter a video file, stream or test pattern",
        description="Filter SOURCE through a chain of filters into OUTPUT (or nowhere, to measure).",
        epilog="Examples:\n  streamconv run media/sample.mp4 -o edges.mp4 --pipeline edge\n"
               "  streamconv run in.mkv -o out.mp4 --filter gaussian:sigma=2 --filter sharpen\n"
               "  streamconv run test:1920x1080@60,frames=600 --filter box:size=5 --backend cuda\n"
               "  streamconv run webcam --filter edge --display\n"
               f"\nWindow keys: {KEYS_HELP}.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("source", metavar="SOURCE",
                     help="a video file or URL; webcam, webcam:N or /dev/videoN for a camera; "
                          "or test[:WxH][@FPS][,frames=N][,live] for a synthetic pattern")
    run.add_argument("-o", "--output", metavar="OUTPUT",
                     help="output video file (container from its extension); omit to discard frames")
    _add_chain_options(run)
    _add_engine_options(run)
    _add_input_options(run)
    _add_encoder_options(run)
    _add_sample_options(run)
    run.add_argument("--stats-json", metavar="PATH", help="write per-stage timings as JSON")
    _add_live_options(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--quiet", "-q", action="store_true", help="no summary table")
    run.add_argument("--verbose", "-v", action="store_true", help="log what is opened and compiled")


def _add_chain_options(run: argparse.ArgumentParser) -> None:
    """The filter chain: --filter, --pipeline, --border."""
    run.add_argument("--filter", "-f", dest="filters", action="append", default=[], metavar="SPEC",
                     help="NAME[:KEY=VALUE,...]; repeat to chain (see `streamconv filters`)")
    run.add_argument("--pipeline", "-p", metavar="NAME|PATH",
                     help=f"a preset ({', '.join(list_presets())}) or a .toml file; --filter stages run after it")
    run.add_argument("--border", choices=BORDER_MODES, default=None,
                     help=f"how pixels outside the frame are read (default {DEFAULT_BORDER}, or the preset's)")


def _add_engine_options(run: argparse.ArgumentParser) -> None:
    """Where and how the chain runs: --backend, --device, --kernel, --ring."""
    run.add_argument("--backend", choices=BACKENDS, default="auto",
                     help="auto picks cuda when PyCUDA and a GPU are present (default auto)")
    run.add_argument("--device", type=non_negative_int, default=0, metavar="N", help="CUDA device number")
    run.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto", metavar="NAME",
                     help="CUDA kernel variant: auto (default: separable for rank-1 taps of 7x7 and "
                          "up, tensor-core for other taps of 5x5 to 9x9 and one 3x3 matrix, else "
                          "register-blocked), "
                          + ", ".join(KERNEL_CHOICES[1:]))
    run.add_argument("--ring", type=ring_size, default=3, metavar="N",
                     help=f"frames in flight between reader, GPU and writer, 1 to {MAX_RING} "
                          "(default 3; each holds two frames in host memory, checked against the "
                          "memory available before any is allocated)")


def _add_input_options(run: argparse.ArgumentParser) -> None:
    """What is read of SOURCE, and how: frame and size limits, the network timeout, the
    stream, the decoder, the other streams."""
    run.add_argument("--max-frames", type=non_negative_int, metavar="N", help="stop after N frames")
    run.add_argument("--max-pixels", type=pixel_limit, default=DEFAULT_MAX_PIXELS, metavar="N|WxH",
                     help="refuse inputs with larger frames before allocating buffers "
                          "(default 7680x4320; a plain 0: no limit, but frames that do not fit "
                          "in the available memory are still refused)")
    run.add_argument("--timeout", type=timeout_seconds, metavar="SECONDS",
                     help="give up on a network input that sends nothing for this long, up to "
                          f"{MAX_TIMEOUT:g} (default {NETWORK_TIMEOUT:g} s for URLs, none for files; "
                          "0: wait forever)")
    run.add_argument("--video-stream", type=non_negative_int, default=0, metavar="N",
                     help="which video stream of the input (default 0, the first)")
    run.add_argument("--hwaccel", metavar="KIND",
                     help="decode the input on a hardware decoder, e.g. cuda (NVDEC); frames come back "
                          "to host memory as nv12/p010 planes (default: software decoding)")
    run.add_argument("--no-audio", action="store_true",
                     help="leave out the input's audio and subtitle streams (copied unchanged by default)")


def _add_encoder_options(run: argparse.ArgumentParser) -> None:
    """How OUTPUT is written: --overwrite, --codec, --pix-fmt, --crf, --preset."""
    run.add_argument("--overwrite", "-y", action="store_true",
                     help="replace OUTPUT and the --stats-json file if they exist (keeping their permissions)")
    run.add_argument("--codec", default="libx264", help="encoder (default libx264)")
    run.add_argument("--pix-fmt", default=None,
                     help="encoder pixel format (default yuv420p; for 10-bit and deeper input the "
                          "codec's 4:2:0 format of that depth, e.g. yuv420p10le)")
    run.add_argument("--crf", type=crf_value, help="constant rate factor for x264/x265, a number >= 0 "
                                                    "(codec default if omitted)")
    run.add_argument("--preset", dest="codec_preset", metavar="PRESET",
                     help="encoder speed preset, e.g. ultrafast..veryslow (codec default if omitted)")


def _add_sample_options(run: argparse.ArgumentParser) -> None:
    """What the filters see: --colour (where yuv420p is converted) and --depth (bits per sample)."""
    run.add_argument("--colour", choices=COLOUR_PATHS, default="auto",
                     help="where yuv420p video is converted to and from RGB: backend (the slots carry "
                          "the planes; on the GPU for cuda), host (FFmpeg's scaler in the reader and "
                          "writer), auto (default: backend on cuda, host on cpu)")
    run.add_argument("--depth", choices=("auto", "8", "16"), default="auto",
                     help="bits per sample the filters work in: 16 keeps 10-bit and deeper video "
                          "without banding, 8 is faster; auto (default): 16 for input deeper than "
                          "8 bits, else 8")


def _add_live_options(run: argparse.ArgumentParser) -> None:
    """The "live video and display" group: the window, real-time files, camera settings."""
    live = run.add_argument_group("live video and display")
    live.add_argument("--display", action="store_true",
                      help="show the filtered video in a window (with -o: record while watching)")
    live.add_argument("--side-by-side", action="store_true",
                      help="show input and output side by side (implies --display)")
    live.add_argument("--no-overlay", action="store_true",
                      help="start with the fps/latency overlay hidden (key o toggles it)")
    live.add_argument("--realtime", action="store_true",
                      help="deliver a file's frames at its frame rate (default: as fast as possible)")
    live.add_argument("--size", type=frame_size, metavar="WxH", help="camera capture size to request")
    live.add_argument("--fps", type=positive_float, metavar="FPS", help="camera frame rate to request")


def cmd_run(args: argparse.Namespace) -> int:
    """``streamconv run``: validate everything cheap first, then run the pipeline."""
    stages, border = _run_chain(args)
    display = args.display or args.side_by_side
    _check_run_outputs(args, display)
    pipeline = _build_pipeline(args, stages, border, display)
    try:
        stats = pipeline.run()
    except CameraLostError:
        if pipeline.stats is not None and pipeline.stats.frames:
            _report(args, pipeline.stats)  # what was recorded before the camera went away
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
    if args.output is not None:
        check_output_path(args.output, overwrite=args.overwrite, protect=(args.source,))
    if args.stats_json is not None:
        check_output_path(args.stats_json, overwrite=args.overwrite, what="--stats-json",
                          protect=_written_by_run(args, but="stats_json"))


def _build_pipeline(args: argparse.Namespace, stages: list[FilterStage], border: str,
                    display: bool) -> Pipeline:
    """Open SOURCE and the sinks and make the Pipeline; whatever was opened is released if a
    later step fails."""
    sink_options = {"codec": args.codec, "pix_fmt": args.pix_fmt, "crf": args.crf,
                    "preset": args.codec_preset, "overwrite": args.overwrite}
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
        copy = args.output is not None and not args.no_audio
        source = open_source(args.source, video_stream=args.video_stream, copy_streams=copy,
                             max_pixels=args.max_pixels, timeout=args.timeout,
                             depth=None if args.depth == "auto" else int(args.depth), hwaccel=args.hwaccel)
    if args.realtime and not source.is_live:
        source = RealtimeSource(source)
    return source


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
        write_atomically(args.stats_json, json.dumps(stats.to_dict(), indent=1) + "\n",
                         overwrite=args.overwrite, what="--stats-json",
                         protect=_written_by_run(args, but="stats_json"))
    if not args.quiet:
        print(stats.format_table(), file=sys.stderr)


def _check_run_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
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


def cmd_filters(_args: argparse.Namespace) -> int:
    """``streamconv filters``: the registry and the presets."""
    print(describe_registry())
    print("\nPresets (--pipeline NAME):")
    for name in list_presets():
        preset = load_preset(name)
        chain = " -> ".join(f.describe() for f in preset.filters)
        print(f"  {name:<10} {preset.description}\n  {'':<10} {chain}")
    return 0


def cmd_info(_args: argparse.Namespace) -> int:
    """``streamconv info``: versions and backend availability."""
    import av
    import cv2
    import numpy

    print(f"streamconv {__version__}")
    print(f"python     {platform.python_version()} ({sys.executable})")
    print(f"numpy      {numpy.__version__}")
    print(f"av         {av.__version__} (FFmpeg libavcodec {'.'.join(map(str, av.library_versions['libavcodec']))})")
    print(f"opencv     {cv2.__version__}")
    try:
        import pycuda

        print(f"pycuda     {pycuda.VERSION_TEXT}")
    except ImportError:
        print("pycuda     not installed")
    print("backends:")
    print("  cpu: available (NumPy + OpenCV reference)")
    usable, reason = cuda_status(0)
    print(f"  cuda: {'available: ' if usable else 'unavailable: '}{reason}")
    return 0


COMMANDS = {"run": cmd_run, "filters": cmd_filters, "info": cmd_info, "bench": cmd_bench}


def main(argv: Sequence[str] | None = None, *, signals: SignalGuard | None = None) -> int:
    """Entry point of the console script; returns the process exit code.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
        signals: a guard already installed by the caller (see :mod:`streamconv.launch`);
            otherwise one is installed here and restored on return. SIGINT or SIGTERM outside a
            run's frames ends the command at once with 130 or 143; during a run, see Pipeline.
    """
    own = signals is None
    guard = SignalGuard().install() if own else signals
    try:
        return _main(argv, guard)
    except KeyboardInterrupt as exc:  # Interrupted, or Ctrl-C where no guard could be installed
        return _interrupted(getattr(exc, "signum", None) or guard.received)
    finally:
        if own:
            guard.restore()


def _main(argv: Sequence[str] | None, guard: SignalGuard) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        _check_run_args(parser, args)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="streamconv: %(message)s", stream=sys.stderr, force=True)
    try:
        return COMMANDS[args.command](args)
    except StreamconvError as exc:
        if guard.received is not None:  # e.g. a FIFO's open() cut short by the signal
            return _interrupted(guard.received)
        print(f"streamconv: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a bug: one line, and the traceback only when asked for
        if guard.received is not None:
            return _interrupted(guard.received)
        if verbose:
            raise
        print(f"streamconv: internal error: {type(exc).__name__}: {exc} (run with -v for details)",
              file=sys.stderr)
        return 1


def _interrupted(signum: int | None) -> int:
    """Say so, and the exit code a shell gives a process the signal ended (130, 143)."""
    try:
        print("streamconv: interrupted; nothing half-written was kept", file=sys.stderr)
    except (KeyboardInterrupt, OSError):
        pass  # a further signal, or a closed stderr: the exit code still says it
    return 128 + signum if signum else EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
