"""The ``streamconv`` argument parser: every subcommand and its options, in groups."""

from __future__ import annotations

import argparse

from .. import __version__
from ..backends import BACKENDS
from ..backends.plan import KERNEL_CHOICES
from ..frames.borders import BORDER_MODES, DEFAULT_BORDER
from ..chain.chain_string import split_chain
from ..frames.checks import DEFAULT_MAX_PIXELS, MAX_RING
from ..io.ffmpeg.container import NETWORK_TIMEOUT
from ..io.sinks.display import KEYS_HELP
from ..io.sources.nvdec.caps import DECODERS
from ..io.sources.reconnect import RECONNECT_WINDOW
from ..run.settings import COLOUR_PATHS
from ..chain.presets import list_presets
from ..chain.suggest import did_you_mean
from .bench import add_bench_parser
from .install_cuda import add_install_cuda_parser
from .messages import brief
from .options import (MAX_TIMEOUT, argument_type, bit_rate, container_format, crf_value,
                      device_list, ffmpeg_option, frame_size, non_negative_int, pixel_format,
                      pixel_limit, positive_float, positive_int, preset_name, ring_size,
                      timeout_seconds)
from .report import add_report_option, add_report_parser
from .trim import add_trim_options

UNRECOGNIZED = "unrecognized arguments: "
"""How argparse (and the commands' own checks) begin the message of unknown options."""

RUN_GROUPS = ("input", "filters", "engine", "encoder and output", "live and display", "network",
              "jobs", "reporting")
"""The headings of ``run --help``, in order; ``batch --help`` has those it needs, in the same
order."""

BATCH_GROUPS = ("input", "filters", "engine", "encoder and output", "jobs", "reporting")


class Parser(argparse.ArgumentParser):
    """argparse's parser (for the commands too), whose usage errors echo no value whole and
    guess the option meant where one is unknown."""

    def error(self, message: str):
        super().error(brief(message + self._option_meant(message)))

    def _option_meant(self, message: str) -> str:
        """`` (did you mean '--filter'?)`` after an unknown option (``unrecognized arguments:
        --fitler edge``), for the first that is close to one of this parser's."""
        if not message.startswith(UNRECOGNIZED):
            return ""
        for word in message.removeprefix(UNRECOGNIZED).split():
            if word.startswith("-") and word != "-":
                hint = did_you_mean(word.partition("=")[0], self._option_string_actions)
                if hint:
                    return hint
        return ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = Parser(
        prog="streamconv",
        description="Filter video files and streams with 2D convolution on an NVIDIA GPU "
                    "(or the CPU reference backend).")
    parser.add_argument("--version", action="version", version=f"streamconv {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run_parser(commands)
    _add_batch_parser(commands)
    commands.add_parser("filters", help="list filters, their parameters and the presets")
    commands.add_parser("info", help="versions, and which backends can run here and why not")
    commands.add_parser(
        "gst-path", help="the folder to put on GST_PLUGIN_PATH for the GStreamer element",
        description="Print the folder whose python/ subfolder registers the streamconv GStreamer "
                    "element: export GST_PLUGIN_PATH=$(streamconv gst-path)")
    add_bench_parser(commands)
    add_install_cuda_parser(commands)
    add_report_parser(commands)
    for command in commands.choices.values():
        command.set_defaults(command_parser=command)  # its own usage for its own errors
    return parser


def _groups(parser: argparse.ArgumentParser, titles: tuple[str, ...]) -> dict:
    """The parser's option groups, made in the order of ``titles`` (the order of --help)."""
    return {title: parser.add_argument_group(title) for title in titles}


def _add_run_parser(commands) -> None:
    """Add ``streamconv run``: SOURCE and OUTPUT, then its options theme by theme, each into its
    group (the order they are added in is the order of the usage line; the groups' order is
    that of --help)."""
    run = commands.add_parser(
        "run", help="filter a video file, stream or test pattern",
        description="Filter SOURCE through a chain of filters into OUTPUT (or nowhere, to "
                    "measure).",
        epilog="Examples:\n  streamconv run media/sample.mp4 -o edges.mp4 --pipeline edge\n"
               "  streamconv run in.mkv -o out.mp4 --filter gaussian:sigma=2 --filter sharpen\n"
               "  streamconv run test:1920x1080@60,frames=600 --filter box:size=5 --backend cuda\n"
               "  streamconv run webcam --filter edge --display\n"
               "  streamconv run webcam:0 webcam:1 --filter edge --display -o 'cam{n}.mp4'\n"
               "  streamconv run - -o - --filter edge < in.mkv | ffplay -\n"
               "  streamconv run 'img%04d.png' --fps 30 -o 'out%04d.png' --filter sharpen\n"
               f"\nWindow keys: {KEYS_HELP}.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    groups = _groups(run, RUN_GROUPS)
    _add_source_arguments(groups["input"])
    _add_output_arguments(groups["encoder and output"])
    _add_chain_options(groups["filters"])
    _add_engine_options(groups["engine"], groups["jobs"])
    _add_input_options(groups["input"], groups["network"])
    _add_encoder_options(groups["encoder and output"])
    _add_sample_options(groups["filters"])
    _add_network_options(groups["network"])
    reporting = groups["reporting"]
    reporting.add_argument("--stats-json", metavar="PATH", help="write per-stage timings as JSON")
    add_report_option(reporting)
    _add_live_options(groups["live and display"])
    reporting.add_argument(
        "--progress", metavar="PATH|-",
        help="write FFmpeg-style progress (key=value blocks: frame=, fps=, out_time_us=, "
             "dropped=, progress=continue|end) about every 0.5 s and at the end; - for "
             "standard output")
    _add_verbosity_options(reporting, progress="no progress bar", quiet="no summary table")


def _add_source_arguments(group) -> None:
    """SOURCE, positional or as ``-i``."""
    group.add_argument(
        "source", metavar="SOURCE", nargs="?",
        help="a video file or URL; - for standard input; an image sequence (img%%04d.png); "
             "webcam, webcam:N or /dev/videoN for a camera; or "
             "test[:WxH][@FPS][,frames=N][,live] for a synthetic pattern. Several SOURCEs run at "
             "once, each through its own pipeline, with --display (tiled in one window), -o with "
             "{n} (one output per source, n its index from 0), or when every one is a camera or "
             "live test pattern; a second name is otherwise an error, never taken as OUTPUT")
    group.add_argument("-i", "--input", dest="input_spec", metavar="SOURCE",
                       help="SOURCE, as FFmpeg users type it (-i in.mp4)")
    add_trim_options(group)


def _add_output_arguments(group) -> None:
    """-o OUTPUT and its container, --format."""
    group.add_argument(
        "-o", "--output", metavar="OUTPUT",
        help="output file (container from its extension, or --format), - for standard "
             "output (Matroska unless --format names another), an image sequence "
             "(out%%03d.png), a network URL (rtmp://, rtsp://, srt://, udp://, tcp://) sent to as "
             "it is written, or vcam[:DEVICE] for a virtual camera (the vcam extra); omit to "
             "discard frames. With several SOURCEs, {n} in it is each source's index from 0 "
             "(cam{n}.mp4: cam0.mp4, cam1.mp4...)")
    group.add_argument(
        "--format", "-f", metavar="NAME", type=container_format("w"),
        help="OUTPUT's container, FFmpeg's name (-f after -i): matroska, mpegts, mp4, "
             "nut, rawvideo, image2, flv...; a URL's is by its scheme (flv for rtmp, rtsp, "
             "mpegts for srt, udp and tcp)")


def _add_verbosity_options(group, *, progress: str, quiet: str) -> None:
    """--no-progress, --quiet and --verbose (``progress`` and ``quiet``: what each leaves out)."""
    group.add_argument("--no-progress", action="store_true", help=progress)
    group.add_argument("--quiet", "-q", action="store_true", help=quiet)
    group.add_argument("--verbose", "-v", action="store_true",
                       help="log what is opened and compiled")


def _add_batch_parser(commands) -> None:
    """Add ``streamconv batch``: INPUT... and OUTDIR, run's chain, engine, decoder, encoder and
    sample options, and the batch's own, each into its group."""
    batch = commands.add_parser(
        "batch", help="filter many files into a folder, several at a time, on every GPU",
        description="Filter every INPUT into OUTDIR/<its name>, several at once per GPU in one "
                    "process, keeping a manifest of what happened to each "
                    "(OUTDIR/streamconv-batch.json).",
        epilog="Examples:\n  streamconv batch clips/ -o filtered/ --filter edge\n"
               "  streamconv batch 'in/*.mp4' -o out/ --pipeline blur --jobs 4 --devices all\n"
               "  streamconv batch in/ -o out/ --recursive --ext mkv --resume\n"
               "  streamconv batch long/ -o out/ --pipeline blur --segments 4\n"
               "\nExit: 0 all done, 13 some inputs damaged, 14 some failed (see the manifest).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    groups = _groups(batch, BATCH_GROUPS)
    groups["input"].add_argument(
        "inputs", nargs="+", metavar="INPUT",
        help="video files, folders (their video files) or quoted globs ('clips/*.mp4')")
    groups["encoder and output"].add_argument(
        "-o", "--output", dest="outdir", required=True, metavar="OUTDIR",
        help="output folder (made if missing); each output is OUTDIR/<input's name>")
    _add_chain_options(groups["filters"])
    _add_batch_engine_options(groups["engine"], groups["jobs"])
    groups["input"].add_argument("--decoder", choices=DECODERS, default="auto",
                                 help="as for run (default auto)")
    _add_batch_job_options(groups["jobs"], groups["input"], groups["encoder and output"])
    _add_encoder_options(groups["encoder and output"], replaced="outputs in OUTDIR")
    _add_sample_options(groups["filters"])
    _add_verbosity_options(groups["reporting"], progress="no status line", quiet="no summary")


def _add_batch_engine_options(engine, jobs) -> None:
    """The engine and the sharing out of batch's work: run's, with what they mean for a batch."""
    _add_shared_engine_options(
        engine, jobs, kernel_help="CUDA kernel variant (as for run)",
        ring_help="frames in flight per input (default 3)",
        devices_help="GPUs to spread the inputs over (default 0)",
        segments_help="filter each input in N segments cut at its keyframes and joined into its "
                      "output (as run --segments): the inputs one after another, each one's "
                      "segments at once over --devices (with --jobs J: J times the GPUs at most), "
                      "on NVDEC with --decoder nvdec; not with --ray or --processes above 1",
        ray_help="run each input as a task on a Ray cluster (the ray extra): the one at ADDRESS, "
                 "else RAY_ADDRESS's or a new local one; inputs and outputs on a shared path")


def _add_batch_job_options(jobs, inputs, outputs) -> None:
    """Batch's own: inputs at once and worker processes, which inputs, where outputs go, the
    manifest and resuming."""
    jobs.add_argument(
        "--jobs", "-j", type=positive_int, metavar="N",
        help="inputs at once per GPU (default: a quarter of the cores, at least 2 on a GPU)")
    jobs.add_argument(
        "--processes", type=positive_int, metavar="N",
        help="worker processes the inputs are shared among (default: one per 4 inputs at once; "
             "1: threads of one process)")
    inputs.add_argument(
        "--recursive", "-r", action="store_true",
        help="take folders' subfolders too (outputs keep their relative paths), and ** in globs")
    outputs.add_argument("--ext", metavar="EXT",
                         help="the outputs' extension, e.g. mkv (default: the input's)")
    jobs.add_argument("--manifest", metavar="PATH",
                      help="where the manifest goes (default OUTDIR/streamconv-batch.json)")
    jobs.add_argument(
        "--resume", action="store_true",
        help="skip inputs a previous batch finished, per its manifest: the same input file, "
             "unchanged, under the same settings, its output still there as recorded")


def _add_chain_options(group) -> None:
    """The filter chain: --filter, --pipeline, --border."""
    group.add_argument("--filter", dest="filters", action="append", default=[],
                       metavar="SPEC",
                       help="NAME[:KEY=VALUE,...]; repeat to chain (see `streamconv filters`)")
    group.add_argument("-vf", dest="filters", action="extend", type=argument_type(split_chain),
                       metavar="CHAIN",
                       help="filters in one argument, as FFmpeg's -vf: SPEC,SPEC,... "
                            "(gaussian:sigma=2,size=5,edge); a comma starts the next filter where "
                            "a NAME follows it, alone or before ':', and \\, is a comma inside a "
                            "value; the parameters are streamconv's, as for --filter; in order "
                            "with the --filter stages")
    group.add_argument("--pipeline", "-p", metavar="NAME|PATH",
                       help=f"a preset ({', '.join(list_presets())}) or a .toml file; --filter "
                            "stages run after it")
    group.add_argument("--border", choices=BORDER_MODES, default=None,
                       help=f"how pixels outside the frame are read (default {DEFAULT_BORDER}, "
                            "or the preset's)")


def _add_engine_options(engine, jobs) -> None:
    """Where and how the chain runs: --device, then --backend, --kernel, --ring; and how the
    work is shared out: --devices, --segments, --ray."""
    engine.add_argument("--device", type=non_negative_int, default=None, metavar="N",
                        help="CUDA device number (default 0)")
    _add_shared_engine_options(
        engine, jobs,
        kernel_help="CUDA kernel variant: auto (default: separable for rank-1 taps of 7x7 and "
                    "up, tensor-core for other 8-bit taps of 5x5 to 31x31 and one 3x3 matrix, "
                    "else register-blocked), " + ", ".join(KERNEL_CHOICES[1:])
                    + "; the cpu backend takes separable (rank-1 taps in two passes, within 1 "
                    "of its reference) and ignores the others",
        ring_help=f"frames in flight between reader, GPU and writer, 1 to {MAX_RING} "
                  "(default 3; each holds two frames in host memory, checked against the "
                  "memory available before any is allocated)",
        devices_help="with --segments and the cuda backend: GPUs the segments take in turn "
                     "(default: --device)",
        segments_help="cut a video file at keyframes into N segments of near equal duration, "
                      "filter and encode them at once, and join them into OUTPUT (same frames, "
                      "timestamps and audio as a one-piece run; fewer segments if there are "
                      "fewer keyframes); decoded by libavcodec, or each segment on NVDEC with "
                      "--decoder nvdec",
        ray_help="with --segments: run each segment as a task on a Ray cluster (the ray extra): "
                 "the one at ADDRESS, else RAY_ADDRESS's or a new local one, each task on the "
                 "cuda backend or NVDEC with a GPU of its own; SOURCE and OUTPUT on a path every "
                 "node sees (the parts are written beside OUTPUT), joined here")


def _add_shared_engine_options(engine, jobs, *, kernel_help: str, ring_help: str,
                               devices_help: str, segments_help: str, ray_help: str) -> None:
    """--backend, --kernel, --ring (the engine), --devices, --segments and --ray (the jobs),
    declared once for run and batch (the help says what each means for the command)."""
    engine.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto picks cuda when a CUDA binding and a GPU are present "
                             "(default auto)")
    engine.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto", metavar="NAME",
                        help=kernel_help)
    engine.add_argument("--ring", type=ring_size, default=3, metavar="N", help=ring_help)
    jobs.add_argument("--devices", type=device_list, default=None, metavar="all|N,N,...",
                      help=devices_help)
    jobs.add_argument("--segments", type=positive_int, metavar="N", help=segments_help)
    jobs.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                      help=ray_help)


def _add_input_options(group, network) -> None:
    """What is read of SOURCE, and how: frame and size limits, the network timeout (in the
    network group), the stream, the decoder, the other streams."""
    group.add_argument("--max-frames", type=non_negative_int, metavar="N",
                       help="stop after N frames")
    group.add_argument("--max-pixels", type=pixel_limit, default=DEFAULT_MAX_PIXELS,
                       metavar="N|WxH",
                       help="refuse inputs with larger frames before allocating buffers "
                            "(default 7680x4320; a plain 0: no limit, but frames that do not fit "
                            "in the available memory are still refused)")
    network.add_argument("--timeout", type=timeout_seconds, metavar="SECONDS",
                         help="give up on a network input that sends nothing for this long, up "
                              f"to {MAX_TIMEOUT:g} (default {NETWORK_TIMEOUT:g} s for URLs, "
                              "none for files; 0: wait forever)")
    group.add_argument("--video-stream", type=non_negative_int, default=0, metavar="N",
                       help="which video stream of the input (default 0, the first)")
    group.add_argument("--decoder", choices=DECODERS, default="auto",
                       help="who decodes a file or stream: nvdec (the GPU's hardware decoder; "
                            "frames stay on the GPU for the cuda backend), cpu (libavcodec), or "
                            "auto (default): nvdec when the cuda backend runs and NVDEC can take "
                            "the stream, else cpu")
    group.add_argument("--hwaccel", metavar="KIND",
                       help="decode with FFmpeg's hardware decoder of this kind (e.g. cuda) "
                            "instead; frames come back to host memory as nv12/p010 planes "
                            "(implies --decoder cpu)")
    group.add_argument("--input-format", metavar="NAME", type=container_format("r"),
                       help="read SOURCE with this FFmpeg demuxer (-f before -i), e.g. rawvideo "
                            "(then --size, --input-pix-fmt, --fps), mpegts; default: probed")
    group.add_argument("--input-pix-fmt", metavar="FMT", type=pixel_format,
                       help="pixel format of --input-format rawvideo frames (default yuv420p)")
    group.add_argument("--no-audio", action="store_true",
                       help="leave out the input's audio and subtitle streams (copied unchanged "
                            "by default)")


def _add_encoder_options(group, replaced: str = "OUTPUT and the --stats-json and --progress "
                                                "files") -> None:
    """How OUTPUT is written: --overwrite (of ``replaced``), --codec, --pix-fmt, --crf,
    --bitrate, --preset."""
    group.add_argument("--overwrite", "-y", action="store_true",
                       help=f"replace {replaced} if they exist (keeping their permissions)")
    group.add_argument("--codec", "-c:v", default=None,
                       help="encoder (default libx264; VP9 for .webm, gif for .gif, png, "
                            "mjpeg... for images)")
    group.add_argument("--pix-fmt", default=None, type=pixel_format,
                       help="encoder pixel format (default yuv420p; for 10-bit and deeper input "
                            "the codec's 4:2:0 format of that depth, e.g. yuv420p10le)")
    group.add_argument("--crf", type=crf_value,
                       help="constant quality, a number >= 0: x264/x265's crf, NVENC's cq "
                            "(codec default if omitted)")
    group.add_argument("--bitrate", "-b:v", type=bit_rate, metavar="RATE",
                       help="target bits per second, e.g. 8M or 2500k (codec default if "
                            "omitted)")
    group.add_argument("--preset", dest="codec_preset", metavar="PRESET", type=preset_name,
                       help="encoder speed preset, e.g. ultrafast..veryslow (codec default if "
                            "omitted)")


def _add_sample_options(group) -> None:
    """What the filters see: --colour (where yuv420p is converted) and --depth (bits per sample)."""
    group.add_argument("--colour", choices=COLOUR_PATHS, default="auto",
                       help="where yuv420p (and 10-, 12-bit 4:2:0) video is converted to and from "
                            "RGB: backend (the slots carry the planes; on the GPU for cuda; "
                            "in-gamut colours come back exactly), host (FFmpeg's scaler in the "
                            "reader and writer), auto (default: backend on every backend where "
                            "the formats allow it, else host)")
    group.add_argument("--depth", choices=("auto", "8", "16"), default="auto",
                       help="bits per sample the filters work in: 16 keeps 10-bit and deeper "
                            "video without banding, 8 is faster; auto (default): 16 for input "
                            "deeper than 8 bits, else 8")


def _add_network_options(group) -> None:
    """FFmpeg's own options for the input and output, and reconnecting."""
    group.add_argument("--input-option", dest="input_options", action="append",
                       type=ffmpeg_option, default=[], metavar="KEY=VALUE",
                       help="an FFmpeg option of the input's demuxer or protocol, "
                            "e.g. rtsp_transport=tcp; repeatable")
    group.add_argument("--output-option", dest="output_options", action="append",
                       type=ffmpeg_option, default=[], metavar="KEY=VALUE",
                       help="an FFmpeg option of the output's muxer or protocol, "
                            "e.g. listen=1; repeatable")
    group.add_argument("--reconnect", action="store_true",
                       help="reopen a URL input that stalls (--timeout) or ends, with a growing "
                            "pause; frames missed meanwhile count as dropped (video only: audio "
                            "is not copied)")
    group.add_argument("--reconnect-timeout", type=timeout_seconds, default=None,
                       metavar="SECONDS",
                       help="with --reconnect, give up once the input has been gone this long "
                            f"(default {RECONNECT_WINDOW:g}; 0: never), finishing the output "
                            "(exit 8)")


def _add_live_options(group) -> None:
    """The window, real-time files, camera settings."""
    group.add_argument("--display", action="store_true",
                       help="show the filtered video in a window (with -o: record while "
                            "watching); several SOURCEs are tiled in one window")
    group.add_argument("--side-by-side", action="store_true",
                       help="show input and output side by side (implies --display)")
    group.add_argument("--no-overlay", action="store_true",
                       help="start with the fps/latency overlay hidden (key o toggles it)")
    group.add_argument("--realtime", action="store_true",
                       help="deliver a file's frames at its frame rate (default: as fast as "
                            "possible)")
    group.add_argument("--size", type=frame_size, metavar="WxH",
                       help="camera capture size to request; the frame size of --input-format "
                            "rawvideo")
    group.add_argument("--fps", type=positive_float, metavar="FPS",
                       help="camera frame rate to request; the rate of an image sequence or raw "
                            "video (default 25)")
