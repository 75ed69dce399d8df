"""The per-user cache of kernels NVRTC compiled, so each specialisation compiles once per machine.

Entries are cubins named by the specialisation's key (:func:`streamconv.gpu.prebuilt.source_key`),
the architecture and the NVRTC version, in ``$STREAMCONV_CACHE_DIR``, else
``$XDG_CACHE_HOME/streamconv/kernels``, else ``~/.cache/streamconv/kernels``. Each is written
whole or not at all (a temporary file renamed into place), so processes compiling the same
kernel at once, or one killed mid-write, never leave a torn entry. A cache that cannot be
written is only logged: the kernel still runs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..errors import OutputError

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The folder the cubins live in (it may not exist yet)."""
    explicit = os.environ.get("STREAMCONV_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamconv" / "kernels"


def entry_path(key: str, arch: str, compiler: str) -> Path:
    """Where the cubin of ``key`` for ``arch`` built by ``compiler`` (e.g. ``nvrtc13.0``) lives."""
    return cache_dir() / f"{key}-{arch}-{compiler}.cubin"


def read(key: str, arch: str, compiler: str) -> bytes | None:
    """The cached cubin, or None (absent or unreadable)."""
    try:
        return entry_path(key, arch, compiler).read_bytes()
    except OSError:
        return None


def write(key: str, arch: str, compiler: str, cubin: bytes) -> None:
    """Store a cubin whole; a failure (read-only home, full disk) is logged and ignored."""
    from ..files.publish import write_atomically  # publish imports much; only a compile gets here

    path = entry_path(key, arch, compiler)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, cubin, overwrite=True, what="kernel cache entry")
    except (OSError, OutputError) as exc:
        log.warning("kernel cache not written (%s): %s", path, exc)


def entries() -> int:
    """How many cubins the cache holds (0 if it does not exist)."""
    try:
        return sum(1 for _ in cache_dir().glob("*.cubin"))
    except OSError:
        return 0
