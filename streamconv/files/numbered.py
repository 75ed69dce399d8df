"""Numbered file names: FFmpeg's image-sequence patterns (``img%04d.png``) and the files one names.

A pattern holds one ``%d`` or ``%0Nd`` field (``%%`` is a plain ``%``). :func:`is_pattern`
recognises one, :func:`numbered_files` lists the files on disk it names, and
:func:`pattern_name` gives the name of one number. Reading and writing sequences (FFmpeg's
image2 demuxer and muxer) and protecting an input sequence's files from being written over
build on these; nothing here imports the rest of the package.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_FIELD = re.compile(r"%(0?\d*)d")
_PIECE = re.compile(r"%%|%0?\d*d")


def _fields(name: str) -> list[str]:
    """The ``%d`` fields of a file name, ``%%`` left out."""
    return [piece for piece in _PIECE.findall(name) if piece != "%%"]


def is_pattern(spec: str | os.PathLike) -> bool:
    """Whether the file name of ``spec`` (a path) holds exactly one ``%d``/``%0Nd`` field: an image
    sequence's pattern. URLs and ``pipe:`` specs are not patterns."""
    text = os.fspath(spec)
    if "://" in text or text.startswith(("pipe:", "fd:")):
        return False
    return field_count(text) == 1


def _name_regex(name: str) -> re.Pattern:
    """A regex of the file names a pattern's name matches: ``%0Nd`` as exactly N digits, or more
    without a leading zero (a number wider than N digits is printed whole), so ``out%d.png``
    names ``out1.png`` and never ``out001.png``, which another pattern wrote."""
    parts = []
    for piece in re.split(f"({_PIECE.pattern})", name):
        if piece == "%%":
            parts.append("%")
        elif _FIELD.fullmatch(piece):
            width = max(int(piece[1:-1] or 1), 1)
            parts.append(r"(\d{%d}|[1-9]\d{%d,})" % (width, width))
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def numbered_files(pattern: str | os.PathLike) -> list[Path]:
    """The files in the pattern's folder whose names it matches, sorted (none when the folder is
    missing or unreadable)."""
    path = Path(pattern)
    regex = _name_regex(path.name)
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(path.parent / name for name in names if regex.fullmatch(name))


def irregular_files(pattern: str | os.PathLike) -> list[Path]:
    """The files a pattern names that are not regular files (followed through links): a FIFO, a
    device, a socket, a folder. Found by stat() alone: reading a FIFO with no writer would wait
    for ever."""
    irregular = []
    for path in numbered_files(pattern):
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                irregular.append(path)
        except OSError:  # gone meanwhile, a link to nothing: FFmpeg says so when it gets there
            pass
    return irregular


def pattern_name(pattern: str | os.PathLike, number: int) -> Path:
    """The file a pattern names for ``number`` (``img%04d.png``, 7 -> ``img0007.png``)."""
    path = Path(pattern)

    def fill(match: re.Match) -> str:
        # FFmpeg pads with zeros
        return "%" if match[0] == "%%" else f"{number:0{int(match[0][1:-1] or 1)}d}"
    return path.with_name(_PIECE.sub(fill, path.name))


def is_named_by(pattern: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` is one of the files ``pattern`` names, existing or not (same folder,
    resolved; a name its regex matches)."""
    pattern, path = Path(pattern), Path(path)
    if not _name_regex(pattern.name).fullmatch(path.name):
        return False
    try:
        return pattern.parent.resolve() == path.parent.resolve()
    except (OSError, RuntimeError):
        return False


def field_count(spec: str | os.PathLike) -> int:
    """How many ``%d``/``%0Nd`` fields the file name of ``spec`` holds (``%%`` left out)."""
    return len(_fields(Path(os.fspath(spec)).name))


START_SEARCH = 5
"""FFmpeg's image2 demuxer looks for a sequence's first image among the numbers 0 .. 4
(its ``start_number_range``) unless ``start_number`` says where it starts."""


def _numbers(path: Path) -> set[int]:
    """The numbers of the files on disk that ``path``'s pattern (one field) names."""
    regex = _name_regex(path.name)
    return {int(match[1]) for match in map(regex.fullmatch, (p.name for p in numbered_files(path)))
            if match}


def first_beyond_search(pattern: str | os.PathLike) -> tuple[Path, int] | None:
    """(the first file, its number) of a sequence on disk that FFmpeg does not find because it
    starts beyond the numbers it looks in (:data:`START_SEARCH`); None if it starts within them
    or no file matches."""
    path = Path(pattern)
    numbers = _numbers(path)
    if not numbers or min(numbers) < START_SEARCH:
        return None
    return pattern_name(path, min(numbers)), min(numbers)


def sequence_gap(pattern: str | os.PathLike, start: int = 0,
                 search: int = START_SEARCH) -> tuple[Path, int] | None:
    """Where a sequence on disk has a hole that FFmpeg's image2 demuxer stops at: (the first
    missing file after the first image, how many numbered files lie beyond it), or None.

    The demuxer starts at the lowest number among ``start`` .. ``start + search - 1`` that exists
    (its ``start_number`` and ``start_number_range`` options) and reads on while the next number
    exists (a hole ends the video early, or fails it mid-way).
    """
    path = Path(pattern)
    numbers = _numbers(path)
    first = next((number for number in range(start, start + search) if number in numbers), None)
    if first is None:
        return None
    missing = first
    while missing in numbers:
        missing += 1
    beyond = sum(number > missing for number in numbers)
    return (pattern_name(path, missing), beyond) if beyond else None


def patterns_overlap(first: str | os.PathLike, second: str | os.PathLike, upto: int = 2000) -> bool:
    """Whether two patterns name a file in common among their first ``upto`` numbers each
    (``f%d1.png`` and ``f%d11.png``: f111.png), in one folder (resolved)."""
    first, second = Path(first), Path(second)
    try:
        if first.parent.resolve() != second.parent.resolve():
            return False
    except (OSError, RuntimeError):
        return False
    for one, other in ((first, second), (second, first)):
        regex = _name_regex(other.name)
        if any(regex.fullmatch(pattern_name(one, number).name) for number in range(upto + 1)):
            return True
    return False
