"""What a batch reads and writes: its inputs (files, globs, folders) and each one's output path.

Every decision that can refuse a batch is made here, before any work: an input that is not
there, two inputs that would write the same output, an output that is an input, an output that
exists (unless overwriting or resuming).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import InputError, OutputError

VIDEO_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".ts", ".m2ts", ".mts", ".mpg",
                            ".mpeg", ".flv", ".wmv", ".ogv", ".3gp", ".y4m", ".nut", ".h264", ".h265", ".hevc",
                            ".ivf", ".mxf"})
"""File suffixes a folder's files are taken by (files named on the command line are taken whatever
their suffix)."""


@dataclass(frozen=True)
class BatchInput:
    """One input and the output it is written to.

    Attributes:
        source: the input file.
        output: OUTDIR/<name> (with --recursive, the input's path below the folder it was found in).
    """

    source: Path
    output: Path


def find_inputs(specs: Iterable[str], *, recursive: bool = False) -> list[tuple[Path, Path]]:
    """The input files ``specs`` name, each with the relative path its output takes, in order,
    each once: a file as it is; a glob (``"clips/*.mp4"``, ``**`` with ``recursive``) expanded
    here; a folder's video files (VIDEO_SUFFIXES), and its subfolders' with ``recursive``.

    Raises:
        InputError: a spec names nothing (a missing file, a glob or folder with no video).
    """
    found: dict[Path, Path] = {}
    for spec in specs:
        path = Path(spec)
        if glob.has_magic(spec):
            matches = sorted(Path(m) for m in glob.glob(spec, recursive=recursive) if Path(m).is_file())
            named = [(m, Path(m.name)) for m in matches]
        elif path.is_dir():
            pattern = "**/*" if recursive else "*"
            named = [(m, m.relative_to(path)) for m in sorted(path.glob(pattern))
                     if m.is_file() and m.suffix.lower() in VIDEO_SUFFIXES]
        elif path.is_file():
            named = [(path, Path(path.name))]
        else:
            raise InputError(f"input not found: {spec}")
        if not named:
            raise InputError(f"no video files in {spec}" if path.is_dir() else f"no file matches {spec}")
        for source, relative in named:
            found.setdefault(source.resolve(), relative)
    return list(found.items())


def plan_outputs(inputs: list[tuple[Path, Path]], outdir: Path, *, ext: str | None = None) -> list[BatchInput]:
    """Each input's output: OUTDIR/<relative path>, its extension replaced by ``ext`` if given.

    Raises:
        OutputError: two inputs would write one output, or an output would be an input.
    """
    ext = None if ext is None else (ext if ext.startswith(".") else f".{ext}")
    planned: dict[Path, Path] = {}
    sources = {source for source, _ in inputs}
    outdir = outdir.resolve()
    for source, relative in inputs:
        output = outdir / (relative.with_suffix(ext) if ext else relative)
        if output in planned:
            raise OutputError(f"{planned[output]} and {source} would both be written to {output}; "
                              f"give them different names, or use --ext or --recursive")
        if output in sources or _same_file(output, source):
            raise OutputError(f"the output for {source} would be the input itself ({output}); "
                              f"choose another output folder or --ext")
        planned[output] = source
    return [BatchInput(source, output) for output, source in planned.items()]


def refuse_existing(items: list[BatchInput], *, overwrite: bool, done: set[Path]) -> None:
    """Refuse the batch, before any work, if an output to be written exists and ``overwrite`` is
    False (outputs in ``done``, complete from an earlier run, are skipped, not written).

    Raises:
        OutputError: naming the first few such outputs.
    """
    if overwrite:
        return
    existing = [str(item.output) for item in items if item.output not in done and item.output.exists()]
    if existing:
        more = f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        raise OutputError(f"output exists: {', '.join(existing[:3])}{more} (use --overwrite to replace, "
                          f"or --resume to skip the ones a previous batch finished)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
