"""The files an input spec reads, so that nothing streamconv writes is ever one of them.

An input reads more than the file its spec names: an image sequence (``img%04d.png``) reads
each of its images, a concat list (FFmpeg's concat demuxer, ``--input-format concat`` or a
file starting ``ffconcat version 1.0``) and an HLS playlist (``#EXTM3U``) read the files they
name, and standard input (``-``, ``pipe:``, ``pipe:0``) reads whatever file descriptor 0 is
(``< in.mkv``). :func:`files_read` lists them all: paths, and for a descriptor the file it has
open, known by device and inode (:class:`OpenFile`; a pipe or terminal has no file to protect).

Lists and playlists are recognised by their first bytes whatever ``--input-format`` says (a
list that FFmpeg would not read as one only protects more), read with a byte cap, and followed
into the lists they name in turn (nested concat lists, an HLS master playlist's variants).
Only regular files are opened: a FIFO given as an input is never waited on here.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

from .numbered import is_pattern, numbered_files

MAX_LIST_BYTES = 16 << 20
"""The most of a concat list or playlist read for the files it names (its first 16 MiB)."""

MAX_LIST_DEPTH = 4
"""Lists naming lists are followed this deep (an HLS master playlist and its variants: 2)."""

_SNIFF_BYTES = 4096  # past any comments before a list's first directive


class OpenFile(NamedTuple):
    """A regular file known by what a descriptor has open (``st_dev``, ``st_ino``), not by a
    name: what a run reads as standard input."""

    device: int
    inode: int
    descriptor: int

    def __str__(self) -> str:
        named = {0: "standard input", 1: "standard output"}
        return named.get(self.descriptor, f"descriptor {self.descriptor}")

    def is_file(self, path: str | os.PathLike) -> bool:
        """Whether ``path`` (followed through links) is this file."""
        try:
            found = os.stat(path)
        except (OSError, ValueError):  # missing, a name the OS refuses
            return False
        return (found.st_dev, found.st_ino) == (self.device, self.inode)


def local_path(spec: str | os.PathLike) -> Path | None:
    """The file on this machine that an input spec names (a path, or a ``file:`` URL as FFmpeg
    reads it), or None for a URL, a pipe (``-`` too) or a camera."""
    text = os.fspath(spec)
    if text == "-":
        return None
    if text.startswith("file:"):
        return Path(text[len("file:"):])  # FFmpeg's file protocol takes the rest as a path
    if "://" in text or text.startswith(("pipe:", "fd:")):
        return None
    return Path(text)


def pipe_descriptor(spec: str | os.PathLike) -> int | None:
    """The descriptor a pipe input spec reads: 0 for ``-`` and ``pipe:``, N for ``pipe:N``;
    None for any other spec."""
    text = os.fspath(spec)
    if text in ("-", "pipe:"):
        return 0
    number = text.removeprefix("pipe:") if text.startswith("pipe:") else ""
    return int(number) if number.isdigit() else None


def open_file(descriptor: int) -> OpenFile | None:
    """The regular file ``descriptor`` has open, or None (closed, a pipe, a socket, a terminal)."""
    try:
        found = os.fstat(descriptor)
    except OSError:
        return None
    return OpenFile(found.st_dev, found.st_ino, descriptor) if stat.S_ISREG(found.st_mode) else None


def files_read(spec: str | os.PathLike) -> list[Path | OpenFile]:
    """Every file an input spec reads: its own path (even where nothing exists yet), an image
    sequence's images, the files a concat list or playlist names (see the module), or the
    regular file a pipe spec's descriptor has open; nothing for a URL or a camera."""
    descriptor = pipe_descriptor(spec)
    if descriptor is not None:
        found = open_file(descriptor)
        return [] if found is None else [found]
    path = local_path(spec)
    if path is None:
        return []
    if is_pattern(path):
        return [path, *numbered_files(path)]
    return [path, *_listed_files(path, MAX_LIST_DEPTH, set())]


def _listed_files(path: Path, depth: int, seen: set[tuple[int, int]]) -> list[Path]:
    """The files the concat list or playlist at ``path`` names, and theirs in turn (``depth``
    lists deep); nothing when ``path`` is not a regular file holding one."""
    data = _read_regular(path, seen) if depth > 0 else None
    if data is None:
        return []
    listed = _concat_entries(data) if _is_concat_list(data) else _playlist_entries(data)
    found: list[Path] = []
    for entry in listed:
        named = local_path(entry)
        if named is None or is_pattern(named):
            continue
        named = path.parent / named  # relative to the list's folder, as FFmpeg resolves it
        found += [named, *_listed_files(named, depth - 1, seen)]
    return found


def _read_regular(path: Path, seen: set[tuple[int, int]]) -> bytes | None:
    """The first bytes of a regular file not read before (up to MAX_LIST_BYTES if it starts
    like a list), or None. Anything else (a FIFO, a device) is never opened: it could block."""
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode) or (found.st_dev, found.st_ino) in seen:
            return None
        seen.add((found.st_dev, found.st_ino))
        # O_NONBLOCK: should a FIFO have taken the name since, opening it does not wait
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            head = handle.read(_SNIFF_BYTES)
            if not (_is_concat_list(head) or _lines(head)[:1] == ["#EXTM3U"]):
                return None
            return head + handle.read(MAX_LIST_BYTES - len(head))
    except (OSError, ValueError):  # gone, unreadable, a name the OS refuses
        return None


def _lines(data: bytes) -> list[str]:
    """The lines of a list, stripped, as file names decode (a byte-order mark dropped)."""
    return [os.fsdecode(line).strip() for line in data.removeprefix(b"\xef\xbb\xbf").splitlines()]


def _is_concat_list(data: bytes) -> bool:
    """Whether ``data`` starts as an FFmpeg concat list: its first directive (past blank and
    ``#`` lines) is ``ffconcat`` or ``file``."""
    for line in _lines(data):
        if line and not line.startswith("#"):
            return line.split(maxsplit=1)[0] in ("ffconcat", "file")
    return False


def _concat_entries(data: bytes) -> list[str]:
    """The names of a concat list's ``file`` directives, unquoted as FFmpeg reads them."""
    entries = []
    for line in _lines(data):
        keyword, _, rest = line.partition(" ")
        if keyword == "file" and rest.strip():
            entries.append(_unquote(rest.strip()))
    return entries


def _unquote(text: str) -> str:
    """FFmpeg's token: ``'...'`` taken as it is, ``\\`` escaping the next character, up to the
    first blank outside quotes."""
    token, index = [], 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            token.append(text[index + 1])
            index += 2
            continue
        if char == "'":
            end = text.find("'", index + 1)
            end = len(text) if end < 0 else end
            token.append(text[index + 1:end])
            index = end + 1
            continue
        if char.isspace():
            break
        token.append(char)
        index += 1
    return "".join(token)


_URI = re.compile(r'URI="([^"]*)"')


def _playlist_entries(data: bytes) -> list[str]:
    """An HLS playlist's URIs: its segment and variant lines and the ``URI="..."`` of its
    tags (an initialization section, a key, another rendition's playlist)."""
    entries = []
    for line in _lines(data):
        if line.startswith("#"):
            entries += _URI.findall(line)
        elif line:
            entries.append(line)
    return entries
