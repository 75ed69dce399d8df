"""``streamconv run SRC1 SRC2 ...``: when several SOURCEs are taken, and how they run and report.

A second name after SOURCE was long refused so that a mistyped OUTPUT (``run in.mp4 out.mp4``,
or a glob ``*.mp4`` expanded by the shell) is never read as something to overwrite. Several
SOURCEs are therefore taken only when the run itself says where each one goes, or when none
of them could be a file meant as the output:

- ``--display`` (the sources tiled in one window), or
- ``-o`` with ``{n}`` in its name (one output per source, ``n`` its 0-based index), or
- every SOURCE is a camera (``webcam``, ``webcam:N``, ``/dev/videoN``) or a live test pattern.

No source is ever written to: each output is checked against every SOURCE as for one.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Callable

from ..errors import StreamconvError
from ..io.spec import parse_output, parse_source
from ..io.sinks.targets import check_target
from ..jobs.several import PLACEHOLDER, MultiResult, output_for, run_tiled
from ..run.pipeline import Pipeline
from ..files.publish import ProtectedFiles, check_output_path, protected_files, write_atomically
from .messages import brief, say_error
from .report import run_context, write_run_report

SEVERAL_HELP = ("several SOURCEs run at once, each through its own pipeline, with --display (tiled "
                "in one "
                "window), -o OUTPUT with {n} (one output per source, n from 0), or when every one "
                "is a camera "
                "or live test pattern")


def check_several_sources(parser: argparse.ArgumentParser, args: argparse.Namespace,
                          sources: list[str]) -> None:
    """Usage errors of several SOURCEs (exit 2): taken only as the module docstring says, with
    an OUTPUT per source, and without the options that belong to one run's terminal."""
    display = args.display or args.side_by_side
    numbered = args.output is not None and PLACEHOLDER in args.output
    if not (display or numbered or all(parse_source(spec).is_live for spec in sources)):
        parser.error(f"one SOURCE only, got {' and '.join(map(repr, sources))}; name the output "
                     "with "
                     f"-o OUTPUT (a second name is never taken as the output); {SEVERAL_HELP}")
    if args.output is not None and not numbered:
        parser.error(f"{len(sources)} SOURCEs into one -o {args.output!r}: put {PLACEHOLDER} in "
                     "its name "
                     f"(each source's index from 0), e.g. -o 'out{PLACEHOLDER}.mp4'")
    if args.side_by_side:
        parser.error("--side-by-side shows one SOURCE; --display tiles several")
    if args.progress is not None:
        parser.error("--progress reports one SOURCE's run; with several use --stats-json")


def run_several(args: argparse.Namespace, build: Callable[[argparse.Namespace], Pipeline],
                cycle: list) -> int:
    """Run every SOURCE at once, each through ``build(its own args)``, tiled in one window with
    --display; report each, and return the worst exit code (see
    :class:`streamconv.jobs.several.MultiResult`)."""
    outputs = [output_for(args.output, n) for n in range(len(args.sources))]
    _check_outputs(args, outputs)
    wall = None
    if args.display:
        from ..io.sinks.tiles import TileWall  # OpenCV's GUI only when a window is asked for
        wall = TileWall(title=f"streamconv: {len(args.sources)} sources",
                        overlay=not args.no_overlay, filter_cycle=cycle)

    def own_args(index: int) -> argparse.Namespace:
        return argparse.Namespace(**{**vars(args), "source": args.sources[index],
                                     "output": outputs[index],
                                     "display": False, "no_progress": True})

    result = run_tiled([functools.partial(build, own_args(n)) for n in range(len(args.sources))],
                       args.sources, wall)
    _report(args, result, outputs)
    return result.exit_code


def _check_outputs(args: argparse.Namespace, outputs: list[str | None]) -> None:
    """Before any source is opened: each output new (or --overwrite) and none of the sources, and
    --stats-json and --report none of the run's files."""
    written = {index: output for index, output in enumerate(outputs)
               if parse_output(output, format=args.format).writes_a_file}
    # listed once for every output; the taps files the chain read are inputs too
    inputs = ProtectedFiles([*protected_files(args.sources),
                             *protected_files(getattr(args, "chain_files", {}))])
    for index, output in written.items():  # none may be an input, or another source's output
        others = protected_files({f"the output of source {other}": spec
                                  for other, spec in written.items()
                                  if other != index})
        check_target(output, overwrite=args.overwrite, protect=ProtectedFiles([*inputs, *others]),
                     format=args.format)
    written = [*args.sources, *filter(None, outputs)]
    for path, what, other in ((args.stats_json, "--stats-json", args.report),
                              (args.report, "--report", args.stats_json)):
        if path is not None:
            check_output_path(path, overwrite=args.overwrite, what=what, protect=ProtectedFiles(
                [*protected_files([*written, *filter(None, [other])]),
                 *protected_files(getattr(args, "chain_files", {}))]))


def _report(args: argparse.Namespace, result: MultiResult, outputs: list[str | None]) -> None:
    """Each source's error; --stats-json as a list of the sources' records (whole or not at all)
    and --report as their page; unless --quiet, each source's table and the total."""
    for item in result.results:
        if item.error is not None and isinstance(item.error, (StreamconvError, OSError)):
            say_error(f"source {item.index} ({item.source}): {item.error}")
    context = run_context(args) if args.stats_json or args.report else {}
    records = [{**item.to_dict(), **context} for item in result.results]
    written = [*args.sources, *filter(None, outputs), *getattr(args, "chain_files", {}).values()]
    if args.stats_json:
        text = json.dumps(records, indent=1) + "\n"
        write_atomically(args.stats_json, text, overwrite=args.overwrite, what="--stats-json",
                         protect=[*written, *filter(None, [args.report])])
    if args.report:
        write_run_report(args, records, protect=[*written, *filter(None, [args.stats_json])])
    if args.quiet:
        return
    for item in result.results:
        if item.stats is not None:
            print(brief(f"source {item.index}: {item.source}\n{item.stats.format_table()}"),
                  file=sys.stderr)
    ended = sum(item.error is None for item in result.results)
    seconds = max((item.stats.wall_seconds for item in result.results if item.stats is not None),
                  default=0.0)
    print(f"total: {result.frames} frames from {len(result.results)} sources ({ended} ended "
          "without error) "
          f"in {seconds:.2f} s", file=sys.stderr)
