"""Where the package's data folders are: the CUDA sources and the pipeline presets.

An installed wheel carries them as ``streamconv/cuda`` and ``streamconv/pipelines``;
a source checkout keeps them at the top of the repository, beside ``streamconv/``.
Both are found from this file's location, never from the working directory.
Also: a file test that does not raise for names the OS refuses, and a read that stops at a
byte limit whatever the file claims its size is.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """The folder ``cuda`` or ``pipelines`` of this installation.

    Raises:
        FileNotFoundError: neither the installed nor the source-tree location exists.
    """
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"streamconv data folder {name!r} not found beside {_PACKAGE}")


def is_file(path: Path) -> bool:
    """``path.is_file()``, but False (not OSError) for a name the OS refuses, e.g. too long."""
    try:
        return path.is_file()
    except OSError:
        return False


def read_capped(path: Path, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes of ``path`` (host memory).

    A result longer than ``limit`` means the file is too large; the caller refuses it. The cap
    is on the bytes actually read, not on ``stat()``: files in /proc report a size of 0, and a
    file can grow between a stat() and the read.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as handle:
        return handle.read(limit + 1)


def read_limited(path: Path, limit: int, *, what: str, error: type[Exception]) -> bytes:
    """:func:`read_capped`, refusing a file over ``limit`` bytes: the bytes of ``path`` (host).

    Args:
        what: how messages name the file, its path included (``"preset /x/y.toml"``).
        error: the exception class to raise (the caller's FilterSpecError or PresetError).

    Raises:
        error: the file cannot be read, or holds more than ``limit`` bytes.
    """
    try:
        data = read_capped(path, limit)
    except OSError as exc:
        raise error(f"{what}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if len(data) > limit:
        raise error(f"{what} is too large (over {limit} bytes)")
    return data
