"""The package's version: declared once, in pyproject.toml, and read from there or its metadata."""

from __future__ import annotations

import re
from pathlib import Path

UNKNOWN = "0+unknown"
"""The version of a copy of the package that is neither installed nor in a source checkout."""


def checkout_version(root: Path) -> str | None:
    """The version ``root/pyproject.toml`` declares for streamconv, or None where there is no
    such file or it declares another project (the package imported from a source checkout has
    its pyproject.toml one folder up)."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    if project is None or not re.search(r'^name\s*=\s*"streamconv"\s*$', project[1], re.MULTILINE):
        return None
    version = re.search(r'^version\s*=\s*"([^"]+)"\s*$', project[1], re.MULTILINE)
    return version[1] if version else None


def package_version() -> str:
    """streamconv's version: the checkout's pyproject.toml where the package is imported from a
    source checkout (an installed copy's metadata there may be an older install's), else the
    installed distribution's metadata, else UNKNOWN."""
    found = checkout_version(Path(__file__).resolve().parent.parent)
    if found is not None:
        return found
    from importlib import metadata  # here: 20-30 ms to import, needed only once installed

    try:
        return metadata.version("streamconv")
    except metadata.PackageNotFoundError:
        return UNKNOWN


__version__ = package_version()
