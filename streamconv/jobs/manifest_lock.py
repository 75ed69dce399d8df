"""One batch at a time per manifest.

A batch holds a lock (``flock``) on a hidden file beside its manifest while it runs, so a second
batch of the same manifest (a ``--resume`` started while the first still runs, two scheduled
runs overlapping) is refused at once instead of running the same inputs again and overwriting
the first one's manifest with failures. The kernel drops the lock however the batch ends; the
file is removed when the batch ends normally.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import OutputError
from .manifest import file_identity

try:
    import fcntl
except ImportError:  # no flock (Windows): batches are not kept apart
    fcntl = None


def lock_path(manifest: Path) -> Path:
    """The lock file of ``manifest``: ``.NAME.lock`` beside it."""
    return manifest.with_name(f".{manifest.name}.lock")


@contextmanager
def only_batch(manifest: Path, planned: tuple[int, int] | None) -> Iterator[None]:
    """Hold ``manifest``'s lock while the block runs.

    Args:
        manifest: the batch's manifest file (its folder exists).
        planned: :func:`streamconv.jobs.manifest.file_identity` of the manifest when the batch read
            it to plan its inputs (None: there was none).

    Raises:
        OutputError: another batch holds the lock, or the manifest changed since ``planned``
            (another batch ran in between: this one's plan is out of date).
    """
    lock = lock_path(manifest)
    fd = _acquire(lock, manifest)
    try:
        if file_identity(manifest) != planned:
            raise OutputError(f"{manifest} changed since this batch read it (another batch of it "
                              "ran "
                              f"meanwhile); run the batch again")
        yield
    finally:
        if fd is not None:
            try:
                # while still held: a batch waiting on this file then retries on a new one
                os.unlink(lock)
            except OSError:
                pass
            os.close(fd)


def _acquire(lock: Path, manifest: Path) -> int | None:
    if fcntl is None:
        return None
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise OutputError(f"cannot lock the manifest {manifest}: {lock}: "
                              f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"another batch is running with the manifest {manifest} (it holds "
                              f"{lock}); "
                              "let it end, or give this one another OUTDIR or "
                              "--manifest") from None
        except OSError:  # a file system without locks: batches are not kept apart there
            os.close(fd)
            return None
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False)):
                return fd
        except OSError:
            pass  # removed by the batch that held it as it ended: take the new one
        os.close(fd)
