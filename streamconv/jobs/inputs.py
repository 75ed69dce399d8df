"""What a batch reads and writes: its inputs (files, globs, folders) and each one's output path.

Every decision that can refuse a batch is made here, before any work: an input that is not
there, two inputs that would write the same output, an output that is an input, an output that
exists (unless overwriting, or still as a batch of the manifest left it), an extension with no
muxer, an output folder that is a file. Here too: the hidden temporary files a killed batch
left beside its outputs, found by their exact names (:func:`remove_stale_partials`).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..frames.arguments import check_flag, check_flags, check_path, check_sequence
from .worker import make_output_folder
from ..errors import EXIT_DAMAGED_INPUT, InputError, OutputError
from ..files.leftovers import remove_abandoned
from .manifest import MANIFEST_NAME, BatchRecord, not_a_file
from ..files.publish import temp_name_regex, without_file_scheme
from ..run.options import check_run_options
from .segments import parts_folder_regex

VIDEO_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".ts", ".m2ts", ".mts",
                            ".mpg",
                            ".mpeg", ".flv", ".wmv", ".ogv", ".3gp", ".y4m", ".nut", ".h264",
                            ".h265", ".hevc", ".ivf", ".mxf"})
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


def find_inputs(specs: Iterable[str], *, recursive: bool = False, outdir: Path | None = None,
                skip: Iterable[Path] = ()) -> list[tuple[Path, Path]]:
    """The input files ``specs`` name, each with the relative path its output takes, in order,
    each once (resolved; by its own name rather than a link's found beside it): a file or folder
    that exists as named (glob characters in its name too); else a glob (``"clips/*.mp4"``,
    ``**`` with ``recursive``) expanded here; a folder's video files (VIDEO_SUFFIXES), and its
    subfolders' with ``recursive``.

    Neither takes what the batch itself writes: a folder scan passes over hidden files and folders
    (temporary files, parts folders) and ``outdir``'s tree where it lies inside the folder; a scan
    and a glob, over the files in ``skip`` (the manifest, an earlier batch's outputs).

    Raises:
        InputError: a spec names nothing (a missing file, a glob or folder with no video), or
            ``specs`` is no list.
    """
    skip = {Path(p).resolve() for p in skip}
    outdir = outdir.resolve() if outdir is not None else None
    found: dict[Path, Path] = {}
    by: dict[Path, Path] = {}  # the path each was found by
    specs = check_sequence(specs, "inputs", InputError)  # a string's characters are no inputs
    for spec in map(without_file_scheme, specs):  # file:NAME is NAME, as for run's SOURCE
        try:
            named = _named_by(spec, recursive=recursive, outdir=outdir, skip=skip)
        except OSError as exc:  # a name the OS refuses: too long, a loop of links
            if isinstance(exc, InputError):
                raise
            raise InputError(f"cannot read input {spec}: {exc.strerror or exc}") from None
        for source, relative in named:
            key = source.resolve()
            if key not in found or (by[key].is_symlink() and not source.is_symlink()):
                found[key], by[key] = relative, source  # a file's own name before a link's to it
    return list(found.items())


def _named_by(spec: str, *, recursive: bool, outdir: Path | None,
              skip: set[Path]) -> list[tuple[Path, Path]]:
    """The files one INPUT names, as :func:`find_inputs` takes them (InputError if none)."""
    path = Path(spec)
    if path.is_file():  # an existing name is taken as it is, even with [ ] ? * in it
        named = [(path, Path(path.name))]
    elif path.is_dir():
        named = _scan(path, recursive=recursive, outdir=outdir, skip=skip)
    elif glob.has_magic(spec):
        named = [(m, Path(m.name)) for m in sorted(Path(m) for m in _glob(spec, recursive))
                 if m.is_file() and m.resolve() not in skip]
    elif os.path.exists(path):  # a FIFO (whose opening waits for a writer), a socket, a device
        raise not_a_file(spec)
    else:
        raise InputError(f"input not found: {spec}")
    if not named:
        raise InputError(f"no video files in {spec}" if path.is_dir()
                         else f"no file matches {spec}")
    return named


def _glob(spec: str, recursive: bool) -> list[str]:
    """``glob.glob(spec, recursive=recursive)``, but ``**`` enters each folder once: one reached
    again through a link (``sub/up -> ..``) is passed over, where glob goes round the loop until
    the path is too long, and with two such links never ends. Links to other folders are followed
    (a folder reached by two paths is listed by the first: the same files)."""
    parts = Path(spec).parts
    if spec.endswith(("/", os.sep)):
        return []  # names folders only, never an input file
    if not (recursive and "**" in parts):
        return glob.glob(spec, recursive=recursive)
    first = next(k for k, part in enumerate(parts) if glob.has_magic(part))
    found: list[str] = []
    _match(Path(*parts[:first]) if first else Path(), parts[first:], set(), found)
    return found


def _match(path: Path, rest: tuple[str, ...], seen: set, found: list[str]) -> None:
    """Add to ``found`` the paths below ``path`` that the pattern components ``rest`` name, as
    glob does (hidden names only for a component starting with a dot); ``seen``: the (folder,
    components left) already expanded for ``**``."""
    if not rest:
        found.append(str(path))
        return
    part, tail = rest[0], rest[1:]
    if part != "**":
        children = _children(path, part) if glob.has_magic(part) else [path / part]
        for child in children:
            if os.path.lexists(child):
                _match(child, tail, seen, found)
        return
    key = (path.resolve(), len(rest))
    if key in seen:
        return
    seen.add(key)
    _match(path, tail, seen, found)  # ** as no folder at all
    for child in _children(path, "*"):
        if child.is_dir():
            _match(child, rest, seen, found)
        elif not tail:
            found.append(str(child))


def _children(folder: Path, pattern: str) -> list[Path]:
    """The entries of ``folder`` whose names match ``pattern`` (hidden ones only for a pattern
    starting with a dot, as glob takes them)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [folder / name for name in sorted(names) if fnmatch.fnmatch(name, pattern)
            and (pattern.startswith(".") or not name.startswith("."))]


def _scan(folder: Path, *, recursive: bool, outdir: Path | None,
          skip: set[Path]) -> list[tuple[Path, Path]]:
    """A folder's video files (and its subfolders' with ``recursive``) with their paths below it,
    sorted; hidden entries, ``skip`` and ``outdir``'s tree (when strictly inside) left out."""
    root = folder.resolve()
    inside = outdir if outdir is not None and root in outdir.parents else None
    named = []
    for top, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if recursive and not name.startswith(".")
                      and Path(top, name).resolve() != inside]
        for name in files:
            file = Path(top, name)
            if not name.startswith(".") and file.suffix.lower() in VIDEO_SUFFIXES and \
                    file.is_file() \
                    and file.resolve() not in skip:
                named.append((file, file.relative_to(folder)))
    return sorted(named)


def check_arguments(outdir: Any, manifest: Any, *, ring: Any, colour: Any, sink_options: Any,
                    overwrite: Any, **flags: Any) -> tuple[Path, Path, dict[str, Any]]:
    """A batch's arguments that need no input: OUTDIR's and the manifest's paths and
    ``overwrite`` (OutputError), the other ``flags`` (SettingsError), and ``ring``, ``colour``
    and ``sink_options`` as a run takes them (:func:`streamconv.run.options.check_run_options`).

    Returns:
        (OUTDIR, the manifest's path, the run options checked).
    """
    check_flags(**flags)
    check_flag(overwrite, "overwrite", OutputError)
    outdir = Path(check_path(outdir, "outdir", OutputError))
    if manifest is not None:
        check_path(manifest, "manifest", OutputError)
    run = check_run_options({"ring": ring, "colour": colour, "sink_options": sink_options})
    return outdir, outdir / MANIFEST_NAME if manifest is None else Path(manifest), run


def ext_refusal(ext: str | None) -> str | None:
    """Why ``ext`` cannot be the outputs' extension (None: it can): it must be letters, digits,
    ``_``, ``+`` or ``-``, with or without one leading dot, that FFmpeg has a muxer for."""
    if ext is None:
        return None
    if not isinstance(ext, str):
        return f"ext must be a string such as mkv or .mp4, got {ext!r}"
    name = ext[1:] if ext.startswith(".") else ext
    if not re.fullmatch(r"[A-Za-z0-9_+-]+", name):
        return f"--ext {ext!r} is not a file extension (give one such as mkv or .mp4)"
    if name.lower() not in _muxer_extensions():
        return f"--ext {ext!r}: FFmpeg has no muxer for .{name} files (try mkv, mp4, mov or ts)"
    return None


def ray_refusal(*, devices: Sequence[int] | str | None, processes: int | None,
                ray: str | bool | None) -> str | None:
    """Why a batch on Ray cannot take these options (None: it can), in the command's words: the
    cluster grants each input's task its GPU and process, so ``devices`` and ``processes`` do
    not apply."""
    if ray not in (None, False, "") and (devices is not None or processes is not None):
        return ("--devices and --processes do not apply with --ray (each input is a task that the "
                "cluster grants a GPU share on the node where it runs)")
    return None


def segments_refusal(*, processes: int | None, ray: str | bool | None) -> str | None:
    """Why a batch in segments cannot run with these options (None: it can), in the command's words.

    An input's segments run as threads of the batch's process, each decoding after a seek: Ray
    tasks and worker processes (which take whole inputs) do not apply.
    """
    if ray not in (None, False, ""):
        return ("--ray runs whole inputs as Ray tasks; --segments runs an input's segments in "
                "this process")
    if processes is not None and processes > 1:
        return ("--processes does not apply with --segments (an input's segments run in threads "
                "of one process)")
    return None


def _muxer_extensions() -> set[str]:
    """The file extensions FFmpeg (this PyAV build) guesses an output container from."""
    import av  # here: the batch's checks need it, not every importer of this module
    from av.format import ContainerFormat

    extensions = set()
    for name in av.formats_available:
        try:
            extensions.update(e.strip().lower() for e in ContainerFormat(name, "w").extensions)
        except ValueError:  # a demuxer only
            pass
    return extensions


def plan_outputs(inputs: list[tuple[Path, Path]], outdir: Path, *, ext: str | None = None,
                 recursive: bool = False) -> list[BatchInput]:
    """Each input's output: OUTDIR/<relative path>, its extension replaced by ``ext`` if given.

    Raises:
        OutputError: ``ext`` is refused (:func:`ext_refusal`), two inputs would write one
            output, or an output would be an input.
    """
    refusal = ext_refusal(ext)
    if refusal is not None:
        raise OutputError(refusal)
    ext = None if ext is None else (ext if ext.startswith(".") else f".{ext}")
    planned: dict[Path, Path] = {}
    sources = {source for source, _ in inputs}
    outdir = outdir.resolve()
    for source, relative in inputs:
        output = outdir / (relative.with_suffix(ext) if ext else relative)
        if output in planned:
            raise OutputError(f"{planned[output]} and {source} would both be written to {output}; "
                              + _collision_advice(planned[output], source, ext=ext,
                                                  recursive=recursive))
        if output in sources or _same_file(output, source):
            raise OutputError(f"the output for {source} would be the input itself ({output}); "
                              f"choose another output folder or --ext")
        planned[output] = source
    return [BatchInput(source, output) for output, source in planned.items()]


def _collision_advice(first: Path, second: Path, *, ext: str | None, recursive: bool) -> str:
    """What would part two inputs that would write one output, short of renaming them."""
    if ext is not None and first.stem == second.stem and first.parent == second.parent:
        return f"--ext {ext[1:]} gives both one name (leave it out, or rename one)"
    if recursive:
        return "give them different names, or write them into different output folders"
    return ("give them different names, or name the folder that holds both with --recursive "
            "(the outputs then keep their paths below it)")


def check_outdir(outdir: Path) -> None:
    """Refuse an output folder that is a file or lies under one, before any work.

    Raises:
        OutputError: naming the file in the way.
    """
    blocking = _file_in_the_way(outdir)
    if blocking is not None:
        where = "is a file" if blocking == outdir else f"is under a file ({blocking})"
        raise OutputError(f"the output folder {outdir} {where}; choose another -o")


def make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and any missing parents; returns those made, outermost first.

    Raises:
        OutputError: a file is in the way, or the OS refuses (permissions, a read-only disk).
    """
    check_outdir(folder)
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    make_output_folder(folder)
    return missing


def remove_folders(made: list[Path]) -> None:
    """Remove the folders :func:`make_folders` made, innermost first, where still empty."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (someone else's file now): left, and so are its parents


def _file_in_the_way(folder: Path) -> Path | None:
    """The nearest existing one of ``folder`` and its parents, if it is not a folder."""
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            return None if path.is_dir() else path
    return None


def refuse_existing(items: list[BatchInput], *, overwrite: bool, exempt: set[Path],
                    resume: bool = False) -> None:
    """Refuse the batch, before any work, if an output to be written exists and ``overwrite`` is
    False, or its folder is a file (outputs in ``exempt``: complete from an earlier batch and
    skipped, or still as a batch of the manifest published them and so replaceable).

    Raises:
        OutputError: naming the first few such outputs.
    """
    for folder in sorted({item.output.parent for item in items}):
        blocking = _file_in_the_way(folder)
        if blocking is not None:
            raise OutputError(f"cannot write into {folder}: {blocking} is a file")
    if overwrite:
        return
    existing = [str(item.output) for item in items if item.output not in exempt
                and os.path.lexists(item.output)]
    if existing:
        more = f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        why = ("not as a batch of this manifest left it; use --overwrite to replace" if resume
               else "use --overwrite to replace, or --resume to skip the ones a previous batch "
                    "finished")
        raise OutputError(f"output exists: {', '.join(existing[:3])}{more} ({why})")


def temporary_names(output: Path) -> re.Pattern:
    """The exact names of ``output``'s temporary files
    (:func:`streamconv.files.publish.temp_name_regex`)
    and of the hidden parts folders of a segmented run of it
    (:func:`streamconv.jobs.segments.parts_folder_regex`): no other output's."""
    return re.compile(f"{temp_name_regex(output)}|{parts_folder_regex(output).pattern}")


def remove_stale_partials(outputs: Iterable[Path]) -> None:
    """Remove the temporary files and segments' parts folders (:func:`temporary_names`) a killed
    writer of these outputs left behind, once a batch has ended: one still locked by its writer
    (a task on a Ray node the batch lost touch with) stays."""
    by_folder: dict[Path, list[re.Pattern]] = {}
    for output in outputs:
        by_folder.setdefault(output.parent, []).append(temporary_names(output))
    for folder, patterns in by_folder.items():
        def ours(name: str) -> bool:
            return any(pattern.fullmatch(name) for pattern in patterns)
        # No writer of this batch is starting now: no wait for one to lock what it made.
        remove_abandoned(folder, ours, min_age=0)
        remove_abandoned(folder, ours, min_age=0, folders=True)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_record(item: BatchInput, fingerprint: str, earlier: dict | None, *, complete: bool,
                 ours: bool) -> BatchRecord:
    """An input's record: pending, or kept from an earlier batch when ``complete`` (with its
    figures: skipped if it was done, still damaged, exit code 13, if it was); an earlier output
    still as published keeps its size and mtime (it stays replaceable)."""
    record = BatchRecord(str(item.source), str(item.output), settings=fingerprint)
    if earlier is None:
        return record
    if complete:
        for name in ("frames", "fps", "seconds", "decoder", "device", "bytes", "damage",
                     "input_bytes", "input_mtime_ns", "output_mtime_ns"):
            setattr(record, name, earlier.get(name, getattr(record, name)))
        record.exit_code, record.resumed = earlier.get("exit_code", 0), True
        # Not run again (it would find the same damage), but never passed off as done; a record
        # that earlier releases relabelled skipped still has the exit code.
        record.status = "damaged" if record.exit_code == EXIT_DAMAGED_INPUT else "skipped"
    elif ours:
        record.bytes, record.output_mtime_ns = earlier["bytes"], earlier["output_mtime_ns"]
    return record
