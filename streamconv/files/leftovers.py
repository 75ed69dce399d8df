"""Temporary files and folders a killed writer left behind, told apart from ones in use.

Each writer holds a lock (``flock``) on its temporary file (a temporary folder: on the lock file
inside it) from just after creating it until it is published or removed. The kernel drops the
lock however the process ends, SIGKILL and a crash included, so a later writer of the same
output can remove what nobody holds, and leave alone what a live run (another process, another
machine on a shared folder) is still writing.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Callable

try:
    import fcntl
except ImportError:  # no flock (Windows): nothing is ever taken for abandoned
    fcntl = None

log = logging.getLogger(__name__)

# Files are opened for writing to be locked: on NFS, flock is a POSIX lock, which an exclusive
# lock needs. Nothing is ever written through these descriptors.
FOLDER_LOCK = ".lock"
"""The file inside a temporary folder that its writer holds the lock on."""
ABANDONED_AFTER = 10.0
"""Seconds a temporary file must have gone unmodified before it may count as abandoned: its
writer locks it just after creating it, and this covers that moment."""


def hold_writer_lock(path: Path) -> int | None:
    """Lock ``path``, a temporary file this process has just created, for as long as the
    returned descriptor stays open (pass it to :func:`release_writer_lock`); None where file
    locks are not available or the file cannot be opened again."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def release_writer_lock(fd: int | None) -> None:
    """Let go of a lock from :func:`hold_writer_lock` (after the file was moved or removed)."""
    if fd is not None:
        os.close(fd)


def remove_abandoned(folder: Path, is_ours: Callable[[str], bool], *,
                     min_age: float = ABANDONED_AFTER, folders: bool = False) -> list[Path]:
    """Remove the files in ``folder`` whose (hidden) names ``is_ours`` accepts and whose writers
    are gone: regular files that nobody holds a lock on (with ``folders``: folders whose
    FOLDER_LOCK nobody holds, or that have none) and that have gone unmodified for ``min_age``
    seconds (0 where no writer of them can be starting: a batch that has ended). Returns the
    paths removed; what cannot be looked at is left."""
    remove = _remove_folder_if_abandoned if folders else _remove_if_abandoned
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.name.startswith(".")
                 and is_ours(entry.name)]
    except OSError:
        return []
    removed = [folder / name for name in names if remove(folder / name, min_age)]
    for path in removed:
        log.info("removed %s, left by a writer that is gone", path)
    return removed


def _remove_if_abandoned(path: Path, min_age: float) -> bool:
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # a link, gone already, or not ours to read
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or time.time() - info.st_mtime < min_age:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its writer lives
        if not os.path.samestat(info, os.lstat(path)):
            return False  # replaced by another file meanwhile
        os.unlink(path)  # under the lock: no writer can be holding it now
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def hold_folder_lock(folder: Path) -> int | None:
    """Create FOLDER_LOCK in ``folder`` (a temporary folder this process has just made) and lock
    it as :func:`hold_writer_lock` does; removing the folder later lets go of nothing: close it."""
    try:
        os.close(os.open(folder / FOLDER_LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600))
    except OSError:
        return None
    return hold_writer_lock(folder / FOLDER_LOCK)


def _remove_folder_if_abandoned(path: Path, min_age: float) -> bool:
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or time.time() - info.st_mtime < min_age:
            return False
        fd = os.open(path / FOLDER_LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None  # killed before it locked (or made by a version that did not)
    except OSError:
        return False
    try:
        if fd is not None:
            if fcntl is None:
                return False
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()
    except OSError:
        return False  # its writer lives
    finally:
        if fd is not None:
            os.close(fd)
