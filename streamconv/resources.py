"""Where the package's data folders are: the CUDA sources and the pipeline presets.

An installed wheel carries them as ``streamconv/cuda`` and ``streamconv/pipelines``;
a source checkout keeps them at the top of the repository, beside ``streamconv/``.
Both are found from this file's location, never from the working directory.
Also: a file test that does not raise for names the OS refuses.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


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
