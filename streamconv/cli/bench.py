"""``streamconv bench``: its options, and the command that checks and times the CUDA kernel
variants."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ..bench import (kernels as bench, scale as bench_scale, temporal as bench_temporal,
                     chart as benchplot)
from ..backends import resolve_backend
from ..backends.plan import DEEP_KERNEL_CHOICES, KERNEL_CHOICES
from ..frames.borders import BORDER_MODES, DEFAULT_BORDER
from .options import argument_type, non_negative_int
from ..errors import SettingsError, StreamError
from ..files.publish import check_output_path, write_atomically

log = logging.getLogger("streamconv")


def add_bench_parser(commands) -> None:
    """Add ``streamconv bench`` and its options to the subcommands ``commands``."""
    parser = commands.add_parser(
        "bench", help="time every CUDA kernel variant against K and frame size (needs a GPU)",
        description="Check every CUDA kernel variant against the CPU backend, then time it with "
                    "CUDA events for each K and frame size, beside cv2.filter2D and "
                    "cv2.sepFilter2D "
                    "on the host. 2D variants run random float taps; separable runs a Gaussian; "
                    "auto runs both. Each is timed with one frame after another on one stream, and "
                    "with "
                    "frames dealt over two streams as the pipeline queues them (the '2 str' "
                    "column). "
                    "Prints a table; --json and --chart save it.",
        epilog="Examples:\n  streamconv bench\n  streamconv bench --sizes 4k --ks 3,5 --kernels "
               "auto,register-blocked\n"
               "  streamconv bench --json bench.json --chart bench.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=argument_type(bench.parse_sizes), default=list(bench.SIZES),
                        metavar="LIST", help=f"frame sizes (default {','.join(bench.SIZES)})")
    parser.add_argument("--ks", type=argument_type(bench.parse_ks), default=list(bench.DEFAULT_KS),
                        metavar="LIST",
                        help=f"kernel sizes K (default {','.join(map(str, bench.DEFAULT_KS))})")
    parser.add_argument("--kernels", type=argument_type(bench.parse_kernels), default="all",
                        metavar="LIST",
                        help="kernels to time: all (default) or a list of " + ", ".join(
                            KERNEL_CHOICES))
    parser.add_argument("--border", choices=BORDER_MODES, default=DEFAULT_BORDER,
                        help=f"border mode (default {DEFAULT_BORDER})")
    parser.add_argument("--depth", type=int, choices=(8, 16), default=8,
                        help="bits per sample of the frames (default 8; 16 times the kernels that "
                             "take "
                             "uint16 frames: auto and register-blocked)")
    parser.add_argument("--device", type=non_negative_int, default=0, metavar="N",
                        help="CUDA device number")
    parser.add_argument("--no-host", action="store_true", help="skip the OpenCV host references")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--chart", metavar="PATH",
                        help="draw ms against K as a PNG (needs streamconv[plot])")
    parser.add_argument("--overwrite", "-y", action="store_true",
                        help="replace --json and --chart files that exist")
    parser.add_argument("--no-progress", action="store_true", help="no progress line")
    parser.add_argument("--scale", action="store_true",
                        help="time the scale stage instead (4K to 1080p with every kernel, 1080p "
                             "to 4K; RGB, 8 and 16 bits) beside cv2.resize and the CPU backend")
    parser.add_argument("--temporal", action="store_true",
                        help="time the kernels of stages across frames instead (time only, random "
                             "T x K x K taps, time x space), each checked against the CPU backend")


def cmd_bench(args: argparse.Namespace) -> int:
    """``streamconv bench``: check and time the kernel variants; table, JSON, chart."""
    if args.scale and args.chart:
        raise SettingsError("--chart draws the convolution kernels' timings; "
                              "--scale has a table only")
    if args.chart:
        benchplot.check_matplotlib()
    reports = {"--json": args.json, "--chart": args.chart}
    for option, path in reports.items():
        if path:
            check_output_path(path, overwrite=args.overwrite, what=option,
                              protect={name: other for name, other in reports.items() if other
                                       and name != option})
    kernels = bench.kernels_for_depth(args.kernels, args.depth)
    if not kernels:
        raise SettingsError(f"--depth {args.depth}: none of {', '.join(args.kernels)} takes 16-bit "
                            "frames "
                              f"({' and '.join(DEEP_KERNEL_CHOICES)} do)")
    if len(kernels) < len(args.kernels):
        log.info("--depth %d: timing %s (the other kernels take 8-bit frames only)", args.depth,
                 ", ".join(kernels))
    resolve_backend("cuda", device=args.device)  # a clear error without a usable GPU
    progress = bench.progress_printer(not args.no_progress and sys.stderr.isatty())
    if args.scale:
        return _scale_bench(args, progress)
    if args.temporal:
        return _bench_temporal(args, progress)
    result = bench.run_bench(sizes=args.sizes, ks=args.ks, kernels=kernels, border=args.border,
                             device_number=args.device, host=not args.no_host, progress=progress,
                             depth=args.depth)
    if progress:
        sys.stderr.write("\n")
    if args.json:
        write_atomically(args.json, json.dumps(result, indent=1) + "\n", overwrite=args.overwrite,
                         what="--json")
    if args.chart:
        benchplot.write_chart(result, args.chart, overwrite=args.overwrite)
    print(bench.format_table(result))
    bench.report_failures(result)
    return 0


def _scale_bench(args: argparse.Namespace, progress) -> int:
    """``streamconv bench --scale``: check and time the scale stage; table, JSON."""
    result = bench_scale.run_scale_bench(device_number=args.device, host=not args.no_host,
                                         progress=progress)
    if progress:
        sys.stderr.write("\n")
    if args.json:
        write_atomically(args.json, json.dumps(result, indent=1) + "\n", overwrite=args.overwrite,
                         what="--json")
    print(bench_scale.format_scale_table(result))
    bench.report_failures(result)
    return 0


def _bench_temporal(args: argparse.Namespace, progress) -> int:
    """``streamconv bench --temporal``: the temporal kernels' table (and --json)."""
    env = bench.measure_env(args.device, args.border)
    rows = bench_temporal.run_temporal_bench(env, args.sizes, progress=progress)
    if progress:
        sys.stderr.write("\n")
    if args.json:
        result = {"environment": bench.environment_record(env, 8), "temporal": rows}
        write_atomically(args.json, json.dumps(result, indent=1) + "\n", overwrite=args.overwrite,
                         what="--json")
    print(bench_temporal.format_temporal(rows))
    worst = max(row["max_lsb"] for row in rows)
    if worst > 1:
        raise StreamError(f"a temporal kernel differs from the CPU backend by {worst} LSB")
    return 0
