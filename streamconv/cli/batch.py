"""``streamconv batch``: many inputs into a folder through :class:`streamconv.jobs.batch.Batch`; a
summary and the exit code."""

from __future__ import annotations

import argparse
import sys

from ..jobs.batch import Batch
from ..jobs.inputs import ext_refusal, ray_refusal, segments_refusal
from ..jobs.manifest import frames_written, status_counts
from ..io.ffmpeg.formats import is_pipe
from .messages import brief
from .options import refuse_empty
from .settings import encode_settings, encoder_names, run_chain, run_settings


def check_batch_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of ``batch`` (exit 2): an ``--ext`` that is no extension FFmpeg can write,
    and the options a segmented input (``--segments``), or a task on a cluster (``--ray``), cannot
    take."""
    refuse_empty(parser, [*((spec, "INPUT") for spec in args.inputs), (args.outdir, "--output"),
                          (args.manifest, "--manifest"), (args.pipeline, "--pipeline"),
                          *encoder_names(args)])
    for value, name in ((args.outdir, "--output"), (args.manifest, "--manifest")):
        if is_pipe(value or ""):  # else it would make a folder or file named "-"
            parser.error(f"{name} names a {'folder' if name == '--output' else 'file'}, not a "
                         "pipe; one named "
                         f"{value} is ./{value}")
    refusal = ext_refusal(args.ext) or \
        ray_refusal(devices=args.devices, processes=args.processes, ray=args.ray)
    if refusal is not None:
        parser.error(refusal)
    if args.segments is not None:
        refusal = segments_refusal(processes=args.processes, ray=args.ray)
        if refusal is not None:
            parser.error(refusal)


def cmd_batch(args: argparse.Namespace) -> int:
    """``streamconv batch``: every input through its own pipeline; 0, 13, 14 or 128 + signal."""
    stages, border = run_chain(args)
    batch = Batch(args.inputs, stages, args.outdir, settings=run_settings(args, border),
                  encode=encode_settings(args),
                  jobs=args.jobs, processes=args.processes, devices=args.devices,
                  manifest=args.manifest,
                  resume=args.resume, overwrite=args.overwrite, recursive=args.recursive,
                  ext=args.ext, progress=not args.no_progress, ray=args.ray, segments=args.segments)
    result = batch.run()
    if not args.quiet:
        print(brief(_summary(result)), file=sys.stderr)
    return result.exit_code


def _summary(result) -> str:
    """One line per input that did not simply finish, then the totals."""
    lines = [f"  {r.status:<11} {r.input}" + (f": {r.error}" if r.error else "")
             for r in result.records if r.status not in ("done", "skipped")]
    frames = frames_written(result.records)
    totals = ", ".join(f"{n} {status}" for status, n in status_counts(result.records).items() if n)
    lines.append(f"batch: {len(result.records)} input(s): {totals}; {frames} frames written; "
                 f"manifest {result.manifest}")
    return "\n".join(lines)
