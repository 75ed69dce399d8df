"""The ``streamconv`` argument parser: every subcommand and its options, in groups."""

from __future__ import annotations

import argparse

from .. import __version__
from ..backends import BACKENDS
from ..backends.plan import KERNEL_CHOICES
from ..borders import BORDER_MODES, DEFAULT_BORDER
from .bench import add_bench_parser
from .install_cuda import add_install_cuda_parser
from .messages import brief
from .options import (MAX_TIMEOUT, bit_rate, container_format, crf_value, device_list, ffmpeg_option, frame_size,
                      non_negative_int, pixel_format, pixel_limit, positive_float, positive_int,
                      preset_name, ring_size, timeout_seconds)
from ..io.display import KEYS_HELP
from ..io.container import NETWORK_TIMEOUT
from ..io.reconnect import RECONNECT_WINDOW
from ..io.nvdec_caps import DECODERS
from ..frames import DEFAULT_MAX_PIXELS, MAX_RING
from ..pipeline import COLOUR_PATHS
from ..presets import list_presets



class Parser(argparse.ArgumentParser):
    """argparse's parser (for the commands too), whose usage errors echo no value whole."""

    def error(self, message: str):
        super().error(brief(message))


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
    add_bench_parser(commands)
    add_install_cuda_parser(commands)
    for command in commands.choices.values():
        command.set_defaults(command_parser=command)  # its own usage for its own errors
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
               "  streamconv run webcam:0 webcam:1 --filter edge --display -o 'cam{n}.mp4'\n"
               "  streamconv run - -o - --filter edge < in.mkv | ffplay -\n"
               "  streamconv run 'img%04d.png' --fps 30 -o 'out%04d.png' --filter sharpen\n"
               f"\nWindow keys: {KEYS_HELP}.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("source", metavar="SOURCE", nargs="?",
                     help="a video file or URL; - for standard input; an image sequence (img%%04d.png); "
                          "webcam, webcam:N or /dev/videoN for a camera; or "
                          "test[:WxH][@FPS][,frames=N][,live] for a synthetic pattern. Several SOURCEs run at "
                          "once, each through its own pipeline, with --display (tiled in one window), -o with "
                          "{n} (one output per source, n its index from 0), or when every one is a camera or "
                          "live test pattern; a second name is otherwise an error, never taken as OUTPUT")
    run.add_argument("-i", "--input", dest="input_spec", metavar="SOURCE",
                     help="SOURCE, as FFmpeg users type it (-i in.mp4)")
    run.add_argument("-o", "--output", metavar="OUTPUT",
                     help="output file (container from its extension, or --format), - for standard "
                          "output (Matroska unless --format names another), an image sequence "
                          "(out%%03d.png), a network URL (rtmp://, rtsp://, srt://, udp://, tcp://) sent to as "
                          "it is written, or vcam[:DEVICE] for a virtual camera (the vcam extra); omit to "
                          "discard frames. With several SOURCEs, {n} in it is each source's index from 0 "
                          "(cam{n}.mp4: cam0.mp4, cam1.mp4...)")
    run.add_argument("--format", metavar="NAME", type=container_format("w"),
                     help="OUTPUT's container, FFmpeg's name (-f after -i): matroska, mpegts, mp4, "
                          "nut, rawvideo, image2, flv...; a URL's is by its scheme (flv for rtmp, rtsp, "
                          "mpegts for srt, udp and tcp)")
    _add_chain_options(run)
    _add_engine_options(run)
    _add_input_options(run)
    _add_encoder_options(run)
    _add_sample_options(run)
    _add_network_options(run)
    run.add_argument("--stats-json", metavar="PATH", help="write per-stage timings as JSON")
    _add_live_options(run)
    run.add_argument("--progress", metavar="PATH|-",
                     help="write FFmpeg-style progress (key=value blocks: frame=, fps=, out_time_us=, "
                          "dropped=, progress=continue|end) about every 0.5 s and at the end; - for "
                          "standard output")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--quiet", "-q", action="store_true", help="no summary table")
    run.add_argument("--verbose", "-v", action="store_true", help="log what is opened and compiled")


def _add_batch_parser(commands) -> None:
    """Add ``streamconv batch``: INPUT... and OUTDIR, run's chain, engine, decoder, encoder and
    sample options, and the batch's own."""
    batch = commands.add_parser(
        "batch", help="filter many files into a folder, several at a time, on every GPU",
        description="Filter every INPUT into OUTDIR/<its name>, several at once per GPU in one process, "
                    "keeping a manifest of what happened to each (OUTDIR/streamconv-batch.json).",
        epilog="Examples:\n  streamconv batch clips/ -o filtered/ --filter edge\n"
               "  streamconv batch 'in/*.mp4' -o out/ --pipeline blur --jobs 4 --devices all\n"
               "  streamconv batch in/ -o out/ --recursive --ext mkv --resume\n"
               "  streamconv batch long/ -o out/ --pipeline blur --segments 4\n"
               "\nExit: 0 all done, 13 some inputs damaged, 14 some failed (see the manifest).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    batch.add_argument("inputs", nargs="+", metavar="INPUT",
                       help="video files, folders (their video files) or quoted globs ('clips/*.mp4')")
    batch.add_argument("-o", "--output", dest="outdir", required=True, metavar="OUTDIR",
                       help="output folder (made if missing); each output is OUTDIR/<input's name>")
    _add_chain_options(batch)
    _add_shared_engine_options(
        batch, kernel_help="CUDA kernel variant (as for run)", ring_help="frames in flight per input (default 3)",
        devices_help="GPUs to spread the inputs over (default 0)",
        segments_help="filter each input in N segments cut at its keyframes and joined into its output "
                      "(as run --segments): the inputs one after another, each one's segments at once "
                      "over --devices (with --jobs J: J times the GPUs at most), on NVDEC with --decoder nvdec; "
                      "not with --ray or --processes above 1",
        ray_help="run each input as a task on a Ray cluster (the ray extra): the one at ADDRESS, "
                 "else RAY_ADDRESS's or a new local one; inputs and outputs on a shared path")
    batch.add_argument("--decoder", choices=DECODERS, default="auto", help="as for run (default auto)")
    batch.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                       help="inputs at once per GPU (default: a quarter of the cores, at least 2 on a GPU)")
    batch.add_argument("--processes", type=positive_int, metavar="N",
                       help="worker processes the inputs are shared among (default: one per 4 inputs at once; "
                            "1: threads of one process)")
    batch.add_argument("--recursive", "-r", action="store_true",
                       help="take folders' subfolders too (outputs keep their relative paths), and ** in globs")
    batch.add_argument("--ext", metavar="EXT", help="the outputs' extension, e.g. mkv (default: the input's)")
    batch.add_argument("--manifest", metavar="PATH", help="where the manifest goes (default OUTDIR/streamconv-batch.json)")
    batch.add_argument("--resume", action="store_true",
                       help="skip inputs a previous batch finished, per its manifest: the same input file, "
                            "unchanged, under the same settings, its output still there as recorded")
    _add_encoder_options(batch, replaced="outputs in OUTDIR")
    _add_sample_options(batch)
    batch.add_argument("--no-progress", action="store_true", help="no status line")
    batch.add_argument("--quiet", "-q", action="store_true", help="no summary")
    batch.add_argument("--verbose", "-v", action="store_true", help="log what is opened and compiled")


def _add_chain_options(run: argparse.ArgumentParser) -> None:
    """The filter chain: --filter, --pipeline, --border."""
    run.add_argument("--filter", "-f", dest="filters", action="append", default=[], metavar="SPEC",
                     help="NAME[:KEY=VALUE,...]; repeat to chain (see `streamconv filters`)")
    run.add_argument("--pipeline", "-p", metavar="NAME|PATH",
                     help=f"a preset ({', '.join(list_presets())}) or a .toml file; --filter stages run after it")
    run.add_argument("--border", choices=BORDER_MODES, default=None,
                     help=f"how pixels outside the frame are read (default {DEFAULT_BORDER}, or the preset's)")


def _add_engine_options(run: argparse.ArgumentParser) -> None:
    """Where and how the chain runs: --device, then --backend, --kernel, --ring, --devices, --segments, --ray."""
    run.add_argument("--device", type=non_negative_int, default=None, metavar="N",
                     help="CUDA device number (default 0)")
    _add_shared_engine_options(
        run, kernel_help="CUDA kernel variant: auto (default: separable for rank-1 taps of 7x7 and "
                         "up, tensor-core for other 8-bit taps of 5x5 to 31x31 and one 3x3 matrix, else "
                         "register-blocked), " + ", ".join(KERNEL_CHOICES[1:])
                         + "; the cpu backend takes separable (rank-1 taps in two passes, "
                         "within 1 of its reference) and ignores the others",
        ring_help=f"frames in flight between reader, GPU and writer, 1 to {MAX_RING} "
                  "(default 3; each holds two frames in host memory, checked against the "
                  "memory available before any is allocated)",
        devices_help="with --segments and the cuda backend: GPUs the segments take in turn (default: --device)",
        segments_help="cut a video file at keyframes into N segments of near equal duration, filter "
                      "and encode them at once, and join them into OUTPUT (same frames, timestamps "
                      "and audio as a one-piece run; fewer segments if there are fewer keyframes); decoded by "
                      "libavcodec, or each segment on NVDEC with --decoder nvdec",
        ray_help="with --segments: run each segment as a task on a Ray cluster (the ray extra): the one at "
                 "ADDRESS, else RAY_ADDRESS's or a new local one, each task on the cuda backend or NVDEC "
                 "with a GPU of its own; SOURCE and OUTPUT on a path every node sees (the parts are "
                 "written beside OUTPUT), joined here")


def _add_shared_engine_options(parser: argparse.ArgumentParser, *, kernel_help: str, ring_help: str,
                               devices_help: str, segments_help: str, ray_help: str) -> None:
    """--backend, --kernel, --ring, --devices, --segments and --ray, declared once for run and
    batch (the help says what each means for the command)."""
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto picks cuda when PyCUDA and a GPU are present (default auto)")
    parser.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto", metavar="NAME", help=kernel_help)
    parser.add_argument("--ring", type=ring_size, default=3, metavar="N", help=ring_help)
    parser.add_argument("--devices", type=device_list, default=None, metavar="all|N,N,...", help=devices_help)
    parser.add_argument("--segments", type=positive_int, metavar="N", help=segments_help)
    parser.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS", help=ray_help)


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
    run.add_argument("--decoder", choices=DECODERS, default="auto",
                     help="who decodes a file or stream: nvdec (the GPU's hardware decoder; frames stay "
                          "on the GPU for the cuda backend), cpu (libavcodec), or auto (default): nvdec "
                          "when the cuda backend runs and NVDEC can take the stream, else cpu")
    run.add_argument("--hwaccel", metavar="KIND",
                     help="decode with FFmpeg's hardware decoder of this kind (e.g. cuda) instead; frames "
                          "come back to host memory as nv12/p010 planes (implies --decoder cpu)")
    run.add_argument("--input-format", metavar="NAME", type=container_format("r"),
                     help="read SOURCE with this FFmpeg demuxer (-f before -i), e.g. rawvideo (then "
                          "--size, --input-pix-fmt, --fps), mpegts; default: probed")
    run.add_argument("--input-pix-fmt", metavar="FMT", type=pixel_format,
                     help="pixel format of --input-format rawvideo frames (default yuv420p)")
    run.add_argument("--no-audio", action="store_true",
                     help="leave out the input's audio and subtitle streams (copied unchanged by default)")


def _add_encoder_options(run: argparse.ArgumentParser,
                         replaced: str = "OUTPUT and the --stats-json and --progress files") -> None:
    """How OUTPUT is written: --overwrite (of ``replaced``), --codec, --pix-fmt, --crf, --bitrate, --preset."""
    run.add_argument("--overwrite", "-y", action="store_true",
                     help=f"replace {replaced} if they exist (keeping their permissions)")
    run.add_argument("--codec", default=None,
                     help="encoder (default libx264; VP9 for .webm, gif for .gif, png, mjpeg... for images)")
    run.add_argument("--pix-fmt", default=None, type=pixel_format,
                     help="encoder pixel format (default yuv420p; for 10-bit and deeper input the "
                          "codec's 4:2:0 format of that depth, e.g. yuv420p10le)")
    run.add_argument("--crf", type=crf_value, help="constant quality, a number >= 0: x264/x265's crf, NVENC's "
                                                    "cq (codec default if omitted)")
    run.add_argument("--bitrate", type=bit_rate, metavar="RATE",
                     help="target bits per second, e.g. 8M or 2500k (codec default if omitted)")
    run.add_argument("--preset", dest="codec_preset", metavar="PRESET", type=preset_name,
                     help="encoder speed preset, e.g. ultrafast..veryslow (codec default if omitted)")


def _add_sample_options(run: argparse.ArgumentParser) -> None:
    """What the filters see: --colour (where yuv420p is converted) and --depth (bits per sample)."""
    run.add_argument("--colour", choices=COLOUR_PATHS, default="auto",
                     help="where yuv420p (and 10-, 12-bit 4:2:0) video is converted to and from RGB: "
                          "backend (the slots carry the planes; on the GPU for cuda; in-gamut colours "
                          "come back exactly), host (FFmpeg's scaler in the reader and writer), auto "
                          "(default: backend on every backend where the formats allow it, else host)")
    run.add_argument("--depth", choices=("auto", "8", "16"), default="auto",
                     help="bits per sample the filters work in: 16 keeps 10-bit and deeper video "
                          "without banding, 8 is faster; auto (default): 16 for input deeper than "
                          "8 bits, else 8")


def _add_network_options(run: argparse.ArgumentParser) -> None:
    """FFmpeg's own options for the input and output, the output's container, and reconnecting."""
    run.add_argument("--input-option", dest="input_options", action="append", type=ffmpeg_option, default=[],
                     metavar="KEY=VALUE", help="an FFmpeg option of the input's demuxer or protocol, "
                                               "e.g. rtsp_transport=tcp; repeatable")
    run.add_argument("--output-option", dest="output_options", action="append", type=ffmpeg_option, default=[],
                     metavar="KEY=VALUE", help="an FFmpeg option of the output's muxer or protocol, "
                                               "e.g. listen=1; repeatable")
    run.add_argument("--reconnect", action="store_true",
                     help="reopen a URL input that stalls (--timeout) or ends, with a growing pause; frames "
                          "missed meanwhile count as dropped (video only: audio is not copied)")
    run.add_argument("--reconnect-timeout", type=timeout_seconds, default=None, metavar="SECONDS",
                     help=f"with --reconnect, give up once the input has been gone this long "
                          f"(default {RECONNECT_WINDOW:g}; 0: never), finishing the output (exit 8)")


def _add_live_options(run: argparse.ArgumentParser) -> None:
    """The "live video and display" group: the window, real-time files, camera settings."""
    live = run.add_argument_group("live video and display")
    live.add_argument("--display", action="store_true",
                      help="show the filtered video in a window (with -o: record while watching); several "
                           "SOURCEs are tiled in one window")
    live.add_argument("--side-by-side", action="store_true",
                      help="show input and output side by side (implies --display)")
    live.add_argument("--no-overlay", action="store_true",
                      help="start with the fps/latency overlay hidden (key o toggles it)")
    live.add_argument("--realtime", action="store_true",
                      help="deliver a file's frames at its frame rate (default: as fast as possible)")
    live.add_argument("--size", type=frame_size, metavar="WxH",
                      help="camera capture size to request; the frame size of --input-format rawvideo")
    live.add_argument("--fps", type=positive_float, metavar="FPS",
                      help="camera frame rate to request; the rate of an image sequence or raw video "
                           "(default 25)")
