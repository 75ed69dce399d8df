"""Image outputs: a sequence (``out%03d.png``, one file a frame, numbered from 1) or one image
(``still.png``), each image written by streamconv itself.

The encoder's packets are whole image files (what FFmpeg's image2 muxer writes out one a file), so
each goes through its own :class:`streamconv.files.publish.AtomicFile`: created exclusively under a
hidden temporary name (a link planted at any name is never followed), flushed, and moved into place
without replacing a file unless ``overwrite`` (so a file that appears during the run, a second run
writing the same pattern, is never written over), never onto an input. A reader sees each image
whole as soon as it is finished.

With ``overwrite``, once the first new image is in place the old sequence is being replaced:
when the run ends, the numbered files it had that this run did not write again are removed,
so the pattern never names a mix of two runs' images. A run that fails mid-way keeps the
images it finished; one that is taken back (nothing finished, or a second signal) removes
them. One image is held until the run ends and then published, or never: a second frame for
it is refused.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Iterable

from ...errors import OutputError
from ...files.numbered import (field_count, is_named_by, is_pattern, numbered_files, pattern_name,
                               patterns_overlap)
from ...files.leftovers import remove_abandoned
from ...files.publish import AtomicFile, check_output_path, protected_files, temp_target_name

log = logging.getLogger(__name__)


class _Discard:
    """The file object the container is opened on: the muxer's own bytes are not wanted (each
    packet is written as an image by :meth:`SequenceTarget.write_image` instead)."""

    def write(self, data) -> int:
        return len(data)


class SequenceTarget:
    """An image sequence (a pattern with one ``%d`` field) or a single image file.

    Args:
        pattern: the files' pattern (``out%03d.png``), or one image's name (``still.png``).
        overwrite: replace existing numbered files (and remove the old ones not written
            again); without it any existing one is refused.
        protect: as for :func:`streamconv.files.publish.check_output_path`: never written over, even
            with ``overwrite`` (an input sequence's pattern stands for each of its files);
            a single file that the pattern would name is refused too.
        what: how messages name the output.

    Raises:
        OutputError: (exit 6) a numbered file exists (without ``overwrite``) or is protected, a
            protected file is one the pattern names, the name holds more than one ``%d`` field,
            or the folder is missing or not writable.
    """

    temp = None
    container_options: dict[str, str] = {}
    muxer = "image2pipe"  # the container only holds the encoder: images are written here
    published_as_written = True

    def __init__(self, pattern: str | os.PathLike, *, overwrite: bool = False,
                 protect: Iterable = (), what: str = "output") -> None:
        self.target = Path(pattern)
        if field_count(self.target) > 1:
            raise OutputError(f"{what} {pattern} has {field_count(self.target)} %d fields; an "
                              "image "
                              f"sequence's name holds one (out%03d.png), a single image's none")
        self.single = not is_pattern(self.target)
        self.overwrite, self.what = overwrite, what
        self._protect = protected_files(protect)  # once, not per image
        existing = [] if self.single else numbered_files(self.target)
        for path in [pattern_name(self.target, 1), *existing]:
            check_output_path(path, overwrite=overwrite, protect=self._protect, what=what)
        for role, other in self._protect:
            # a descriptor's file exists: checked above
            if self.single or not isinstance(other, Path):
                continue
            if not is_pattern(other) and is_named_by(self.target, other):
                raise OutputError(f"{what} {pattern} would write {other}, which is {role}")
            if is_pattern(other) and patterns_overlap(self.target, other):
                raise OutputError(f"{what} {pattern} names some of the files of {role} ({other})")
        self._existing = existing
        self._lock = threading.RLock()  # an image is written whole before a discard looks
        self._written: list[Path] = []
        self._held: bytes | None = None  # a single image, published at the end
        self._ended = False

    @property
    def images_finished(self) -> int:
        """Images published so far (a single image only once the run has ended)."""
        return len(self._written)

    def create(self) -> _Discard:
        """What the container is opened on (nothing is created on disk until the first image).
        The temporary images of this target that killed writers left are removed first."""
        remove_abandoned(self.target.parent, self._is_temporary_image)
        return _Discard()

    def _is_temporary_image(self, name: str) -> bool:
        """Whether ``name`` is a temporary file of one of this target's images."""
        image = temp_target_name(name)
        if image is None:
            return False
        return image == self.target.name if self.single else is_named_by(self.target,
                                                                         self.target.parent / image)

    def write_image(self, data: bytes) -> None:
        """Publish the next image (one encoded packet: a whole image file), or hold a single one.

        Raises:
            OutputError: the image's name appeared meanwhile (without ``overwrite``) or became an
                input, a single image got a second frame, or the target was discarded.
            OSError: writing failed (a full disk): the half-written image is removed.
        """
        with self._lock:
            if self._ended:
                raise OutputError(f"{self.what} {self.target} was taken back; no more images are "
                                  "written")
            if self.single:
                if self._held is not None:
                    raise OutputError(f"{self.what} {self.target} is one image and the input has "
                                      "more "
                                      "frames: name a sequence (such as "
                                      f"{_sequence_hint(self.target)}) "
                                      f"or pass --max-frames 1")
                self._held = data
                return
            self._publish_image(pattern_name(self.target, len(self._written) + 1), data)

    def _publish_image(self, path: Path, data: bytes) -> None:
        image = AtomicFile(path, overwrite=self.overwrite, protect=self._protect, what=self.what)
        handle = image.create()
        try:
            handle.write(data)
        except BaseException:
            image.discard()  # the half-written image (a discard waits on the lock: never sees one)
            raise
        image.publish()
        self._written.append(path)

    def publish(self) -> None:
        """Publish a single image; remove the old images this run replaced the sequence of."""
        with self._lock:
            if self._held is not None:
                self._publish_image(self.target, self._held)
                self._held = None
            self._end()

    def discard(self, *, keep_finished: bool = False) -> None:
        """End the output after a failure: unless ``keep_finished``, remove the images this run
        finished (an image being written is finished or removed first: the lock is held while
        it is), leaving the old images it had not replaced yet; with it, the old images not
        written again go too, as when published. Nothing once published or taken back already."""
        with self._lock:
            if self._ended:  # published, or taken back already: what is there stays
                return
            self._held = None
            if not keep_finished:
                _remove(self._written, self.what)
                self._written = []  # taken back: the old images it never replaced are left alone
            self._end()

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        if self._written:  # the old sequence was being replaced: none of its images stay behind
            rewritten = set(self._written)
            _remove([path for path in self._existing if path not in rewritten], self.what)


def _remove(paths: Iterable[Path], what: str) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s image %s: %s", what, path, exc.strerror or exc)


def _sequence_hint(path: Path) -> str:
    """``still.png`` -> ``still%03d.png``: a sequence's name beside a single image's."""
    return str(path.with_name(f"{path.stem}%03d{path.suffix}"))
