"""The ``streamconv`` command: argument parsing, building a Pipeline, mapping errors to exit codes.

Exit codes: 0 success (also after q, Esc or closing the window); 1 internal error; 2 usage;
3 bad filter spec, preset, setting or frame; 4 input missing or undecodable; 5 no video stream;
6 output refused or not writable; 7 backend unavailable; 8 decode/encode failure during the
run; 9 camera cannot be opened; 10 camera stopped delivering and could not be reopened;
11 no display for --display; 12 GPU fault during the run; 13 finished, but the input was
damaged; 130 Ctrl-C (SIGINT); 143 SIGTERM. docs/reliability.md has the table of cases.

Also here: :mod:`.batch` (``streamconv batch``: many inputs into a folder through); :mod:`.bench`
(``streamconv bench``: its options); :mod:`.info` (``streamconv info``: versions, the GPU and its
kernels, the codecs); :mod:`.install_cuda` (``streamconv install-cuda``: the GPU path on a machine
with only the NVIDIA driver); :mod:`.messages` (what the command prints about what was typed: no
value is echoed whole); :mod:`.options` (the command's option types: each turns one option's text
into its value); :mod:`.parser` (the ``streamconv`` argument parser: every subcommand and its
options, in groups); :mod:`.report` (``run --report PATH.html`` and ``streamconv report
STATS.json``: the page of a run); :mod:`.segments` (``streamconv run --segments N``: one file cut at
keyframes); :mod:`.settings` (the run's settings from the command's options, made once: the chain
and its border); :mod:`.several` (``streamconv run SRC1 SRC2 ...``: when several SOURCEs are taken);
:mod:`.trim` (``run -ss``, ``-t`` and ``-to``: FFmpeg's cut of SOURCE, declared, checked and made a
Trim).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

import cv2  # noqa: F401 - first, before any module imports av (streamconv.io.sinks.display.check_import_order)

from ..errors import EXIT_INTERRUPTED, StreamconvError
from ..chain.filters import describe_registry
from ..gst import plugin_path
from ..interrupts import SignalGuard
from ..chain.presets import list_presets, load_preset
from .batch import check_batch_args, cmd_batch
from .bench import cmd_bench
from .info import cmd_info
from .install_cuda import cmd_install_cuda, take_pip_args
from .messages import BriefFormatter, brief, say_error
from .parser import build_parser
from .report import cmd_report
from .run import check_run_args, cmd_run
from .segments import check_segment_args, cmd_run_segments



def cmd_filters(_args: argparse.Namespace) -> int:
    """``streamconv filters``: the registry and the presets."""
    print(describe_registry())
    print("\nPresets (--pipeline NAME):")
    for name in list_presets():
        preset = load_preset(name)
        chain = " -> ".join(f.describe() for f in preset.filters)
        border = f", border {preset.border}" if preset.border else ""
        print(f"  {name:<10} {preset.description}\n  {'':<10} {chain}{border}")
    return 0


def cmd_gst_path(_args: argparse.Namespace) -> int:
    """``streamconv gst-path``: the folder for GST_PLUGIN_PATH (docs/gstreamer.md)."""
    print(plugin_path())
    return 0


def cmd_run_any(args: argparse.Namespace) -> int:
    """``streamconv run``: in one piece, or in segments with --segments N."""
    return cmd_run_segments(args) if args.segments is not None else cmd_run(args)


COMMANDS = {"run": cmd_run_any, "batch": cmd_batch, "filters": cmd_filters, "info": cmd_info,
            "bench": cmd_bench, "install-cuda": cmd_install_cuda, "gst-path": cmd_gst_path,
            "report": cmd_report}


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
    args, extra = parser.parse_known_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)  # for a run's record
    if args.command == "run":
        check_run_args(args.command_parser, args, extra)
        check_segment_args(args.command_parser, args)
    elif args.command == "install-cuda":
        take_pip_args(args, extra)
    elif extra:  # the command's own usage, not the top level's
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "batch":
        check_batch_args(args.command_parser, args)
    verbose = getattr(args, "verbose", False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(BriefFormatter("streamconv: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler],
                        force=True)
    try:
        return COMMANDS[args.command](args)
    except StreamconvError as exc:
        # e.g. a FIFO's open() cut short by the signal, a stream's end not sent
        if guard.received is not None:
            return _interrupted(guard.received, exc)
        say_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a bug: one line, and the traceback only when asked for
        if guard.received is not None:
            return _interrupted(guard.received)
        if verbose:
            raise
        print(brief(f"streamconv: internal error: {type(exc).__name__}: {exc} "
                    "(run with -v for details)"), file=sys.stderr)
        return 1


def _interrupted(signum: int | None, then: StreamconvError | None = None) -> int:
    """Say so (with the error that ``then`` ended the run after the signal: a stream's receiver
    that took nothing more, say), and the exit code a shell gives a process the signal ended."""
    try:
        print(brief(f"streamconv: interrupted (then: {then})") if then is not None else
              "streamconv: interrupted; nothing half-written was kept", file=sys.stderr)
    except (KeyboardInterrupt, OSError):
        pass  # a further signal, or a closed stderr: the exit code still says it
    return 128 + signum if signum else EXIT_INTERRUPTED
