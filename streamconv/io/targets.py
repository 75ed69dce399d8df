"""Where a file sink's container goes: a file published whole, a pipe, or an image sequence.

:func:`open_target` picks one by the output's name (see :mod:`streamconv.io.formats`). Each
has AtomicFile's interface (``target``, ``create()``, ``publish()``, ``discard()``, ``temp``):

- a regular file is a :class:`streamconv.publish.AtomicFile`: written under a temporary name,
  published whole, never the input, never replacing a file without ``overwrite``;
- a pipe (``-``, ``pipe:N``, :class:`PipeTarget`) is written as the container is made: a
  reader sees it at once, there is nothing to publish or take back;
- an image sequence (``out%03d.png``, :class:`SequenceTarget`) is published image by image as
  it is written: each image is written under ``NAME.tmp`` and renamed when whole (FFmpeg's
  ``atomic_writing``), so a reader never sees half an image. Before the first, every existing
  file the pattern names is refused without ``overwrite`` (and never replaced if it is an
  input, with or without it); a failed run removes the images it wrote.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

from ..numbered import numbered_files, pattern_name
from ..publish import AtomicFile, check_output_path, protected_files
from .formats import is_pipe, is_sequence, pipe_url

log = logging.getLogger(__name__)


class MuxedTarget:
    """An output FFmpeg writes as the muxer goes (a pipe, a network URL), in place of
    :class:`streamconv.publish.AtomicFile`: no temporary file, nothing to publish at the end or
    to take back after a failure (what was written has been read or sent)."""

    temp = None
    container_options: dict[str, str] = {}
    published_as_written = True

    def __init__(self, target, url: str) -> None:
        self.target, self.url = target, url

    def create(self) -> str:
        """The URL the muxer opens."""
        return self.url

    def publish(self) -> None:
        """Nothing to do: the muxer's close wrote the last bytes."""

    def discard(self) -> None:
        """Nothing to take back."""


class PipeTarget(MuxedTarget):
    """A pipe: standard output (``-``, ``pipe:``, ``pipe:1``) or another descriptor (``pipe:N``),
    written through FFmpeg's pipe protocol (``pipe:1``) as the muxer writes."""

    def __init__(self, spec: str | os.PathLike) -> None:
        super().__init__(Path(os.fspath(spec)), pipe_url(spec, 1))


class SequenceTarget:
    """An image sequence, written by FFmpeg's image2 muxer one file a frame, numbered from 1.

    Args:
        pattern: the files' pattern (``out%03d.png``).
        overwrite: replace existing numbered files; without it any existing one is refused.
        protect: as for :func:`streamconv.publish.check_output_path`: never written over, even
            with ``overwrite`` (an input sequence's pattern stands for each of its files).
        what: how messages name the output.

    Raises:
        OutputError: (exit 6) a numbered file exists (without ``overwrite``) or is protected, or
            the folder is missing or not writable.
    """

    temp = None
    container_options = {"atomic_writing": "1"}  # each image under NAME.tmp, renamed when whole
    published_as_written = True

    def __init__(self, pattern: str | os.PathLike, *, overwrite: bool = False, protect: Iterable = (),
                 what: str = "output") -> None:
        self.target = Path(pattern)
        existing = numbered_files(self.target)
        protect = protected_files(protect)  # once, not per numbered file
        for path in [pattern_name(self.target, 1), *existing]:
            check_output_path(path, overwrite=overwrite, protect=protect, what=what)
        self._existing = set(existing)

    def create(self) -> str:
        """The pattern the muxer writes its files by."""
        return str(self.target)

    def publish(self) -> None:
        """Nothing to do: every image was renamed into place as it was finished."""

    def discard(self) -> None:
        """Remove the images this run wrote that were not there before (and a half-written one)."""
        written = [path for path in numbered_files(self.target) if path not in self._existing]
        for path in written + numbered_files(self.target.with_name(self.target.name + ".tmp")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not remove %s: %s", path, exc.strerror or exc)


def open_target(spec: str | os.PathLike, *, overwrite: bool = False, protect: Iterable = (),
                format: str | None = None, what: str = "output") -> AtomicFile | PipeTarget | SequenceTarget:
    """The target an output spec names, checked (see the module's docstring).

    Raises:
        OutputError: (exit 6) as :func:`streamconv.publish.check_output_path` for a file or a
            sequence's files; never for a pipe.
    """
    if is_pipe(spec):
        return PipeTarget(spec)
    if is_sequence(spec, format):
        return SequenceTarget(spec, overwrite=overwrite, protect=protect, what=what)
    path = check_output_path(spec, overwrite=overwrite, protect=protect, what=what)
    return AtomicFile(path, overwrite=overwrite, protect=protect, what=what)


def check_target(spec: str | os.PathLike, *, overwrite: bool = False, protect: Iterable = (),
                 format: str | None = None, what: str = "output") -> None:
    """Refuse an output before any work, as :func:`open_target` would (nothing is created)."""
    open_target(spec, overwrite=overwrite, protect=protect, format=format, what=what)
