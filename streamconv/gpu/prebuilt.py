"""Kernels compiled when the wheel was built: fatbins the driver loads without any compiler.

``python -m streamconv.prebuild`` compiles the specialisations of
:mod:`streamconv.backends.catalogue` with nvcc into ``cuda/prebuilt/``: one fatbin each, holding
machine code for several architectures and PTX for later ones, plus ``index.json``. A wheel
built after that carries the folder. Here they are found again by a key made of the
specialisation's full source (its ``#define`` lines and every header included) with comments
stripped, so a kernel whose code changed since the build is never served stale (its key no longer
matches and it compiles), while an edited comment keeps every key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ..files.resources import data_dir

log = logging.getLogger(__name__)

INDEX_NAME = "index.json"
FORMAT = 1
"""The index's layout version: an index of another layout is ignored."""


def prebuilt_dir() -> Path:
    """``cuda/prebuilt`` of this installation (it may not exist)."""
    return data_dir("cuda") / "prebuilt"


_COMMENT_OR_LITERAL = re.compile(r"""
    (?P<line>//(?:\\\n|[^\n])*)         # a // comment, continued by backslash-newlines
  | (?P<block>/\*.*?\*/)                 # a /* */ comment
  | "(?:\\.|[^"\\\n])*"                # a string literal, kept whole
  | '(?:\\.|[^'\\\n])*'                # a char literal, kept whole
""", re.DOTALL | re.VERBOSE)


def strip_comments(text: str) -> str:
    """C/CUDA ``text`` without its comments: a ``/* */`` comment becomes one space, as the
    preprocessor makes it, a ``//`` comment nothing up to its line's end; a comment marker inside
    a string or char literal is left alone. (Raw string literals and ``'`` digit separators are
    not recognised; the kernels use neither.)"""
    def replace(match: re.Match[str]) -> str:
        if match.group("line") is not None:
            return ""
        return " " if match.group("block") is not None else match.group(0)
    return _COMMENT_OR_LITERAL.sub(replace, text)


def code_of(text: str) -> str:
    """What the key hashes of C/CUDA ``text``: its lines without comments (:func:`strip_comments`)
    and trailing blanks, blank lines left out, so that a comment growing by a line keeps it."""
    return "\n".join(line.rstrip() for line in strip_comments(text).splitlines() if line.strip())


def source_key(name: str, text: str) -> str:
    """The key of one specialisation: SHA-256 of its name, its full text (``#define`` lines
    included) and every header of the cuda folder, which its ``#include`` lines may read, each
    as :func:`code_of` gives it: a comment edit keeps the key, a code edit changes it."""
    digest = hashlib.sha256(f"{name}\0{code_of(text)}\0".encode())
    digest.update(_headers())
    return digest.hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def _headers() -> bytes:
    """Every header of the cuda folder, named, without comments, as the key hashes them (read
    once per process)."""
    return b"".join(header.name.encode() + b"\0"
                    + code_of(header.read_text(encoding="utf-8")).encode() + b"\0"
                    for header in sorted(data_dir("cuda").glob("*.cuh")))


@dataclass(frozen=True)
class PrebuiltIndex:
    """What ``cuda/prebuilt/index.json`` says.

    Attributes:
        folder: where the fatbins are.
        compiler: the nvcc that built them, e.g. ``"13.0"`` (the driver must run its CUDA major).
        archs: the machine-code architectures, e.g. ``("sm_75", "sm_80", ...)``.
        ptx: the virtual architecture of the PTX each fatbin carries for later GPUs.
        entries: key -> {"label": ..., "file": ..., "archs": [...]}.
    """

    folder: Path
    compiler: str
    archs: tuple[str, ...]
    ptx: str
    entries: dict[str, dict]

    def loads_on(self, driver_major: int | None) -> bool:
        """Whether a driver of CUDA ``driver_major`` loads code of this nvcc (None: unknown,
        yes)."""
        return driver_major is None or driver_major >= int(self.compiler.split(".")[0])

    def count_for(self, arch: str, driver_major: int | None = None) -> int:
        """How many specialisations can run on ``arch`` under that driver."""
        if not self.loads_on(driver_major):
            return 0
        return sum(self.covers(arch, key) for key in self.entries)

    def covers(self, arch: str, key: str) -> bool:
        """Whether the fatbin of ``key`` holds machine code for ``arch`` or PTX it can run
        (a cubin runs on GPUs of its major version and a later minor)."""
        entry = self.entries.get(key)
        if entry is None:
            return False
        major, minor = divmod(int(arch[3:]), 10)
        for built in entry["archs"]:
            built_major, built_minor = divmod(int(built[3:]), 10)
            if built_major == major and built_minor <= minor:
                return True
        return int(entry.get("ptx", self.ptx)[8:]) <= int(arch[3:])


@functools.lru_cache(maxsize=None)
def read_index(folder: Path | None = None) -> PrebuiltIndex | None:
    """The index of ``folder`` (default :func:`prebuilt_dir`), or None when there is none or it
    cannot be read (logged: the kernels then compile)."""
    folder = folder or prebuilt_dir()
    path = folder / INDEX_NAME
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT}")
        return PrebuiltIndex(folder, str(raw["compiler"]), tuple(raw["archs"]), str(raw["ptx"]),
                             dict(raw["entries"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the prebuilt kernels' index %s: %s", path, exc)
        return None


def lookup(name: str, text: str, arch: str, driver_major: int | None = None) -> bytes | None:
    """The prebuilt fatbin of kernel file ``name`` whose full text is ``text``, if there is one that
    can run on ``arch`` under a driver of CUDA ``driver_major``; else None."""
    index = read_index()
    if index is None or not index.loads_on(driver_major):
        return None
    key = source_key(name, text)
    if not index.covers(arch, key):
        return None
    try:
        return (index.folder / index.entries[key]["file"]).read_bytes()
    except OSError as exc:
        log.warning("prebuilt kernel %s unreadable: %s", index.entries[key]["label"], exc)
        return None


def summary(arch: str | None = None, driver_major: int | None = None) -> str:
    """One line on the prebuilt kernels, e.g. ``212 specialisations (nvcc 13.0; sm_75 ... + PTX
    compute_80); cover sm_90``; or why there are none."""
    index = read_index()
    if index is None:
        return f"none in this installation ({prebuilt_dir()} has no {INDEX_NAME})"
    line = (f"{len(index.entries)} specialisations (nvcc {index.compiler}; {' '.join(index.archs)} "
            "+ PTX "
            f"{index.ptx})")
    if not index.loads_on(driver_major):
        return line + f"; not loadable by this driver (CUDA {driver_major}): they compile instead"
    if arch is not None:
        line += f"; {index.count_for(arch)} run on this GPU ({arch})"
    return line

