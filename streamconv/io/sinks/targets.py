"""Where a file sink's container goes: a file published whole, a pipe, or an image sequence.

:func:`open_target` picks one by the output's name (see :mod:`streamconv.io.ffmpeg.formats`). Each
has AtomicFile's interface (``target``, ``create()``, ``publish()``, ``discard()``, ``temp``):

- a regular file is a :class:`streamconv.files.publish.AtomicFile`: written under a temporary name,
  published whole, never the input, never replacing a file without ``overwrite``;
- a pipe (``-``, ``pipe:N``, :class:`PipeTarget`) is written as the container is made: a
  reader sees it at once, there is nothing to publish or take back;
- an image sequence (``out%03d.png``) or a single image (``still.png``) is a
  :class:`streamconv.io.sinks.sequence.SequenceTarget`: each image published whole as it is
  finished, with AtomicFile's rules image by image.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ...frames.arguments import check_flag, check_instance, check_options, check_path
from ...errors import OutputError
from ...files.publish import AtomicFile, check_output_path
from ..ffmpeg.formats import is_image_output, is_pipe, output_format, pipe_url, url_scheme
from ..ffmpeg.muxer_options import check_muxer_options
from .sequence import SequenceTarget


class MuxedTarget:
    """An output FFmpeg writes as the muxer goes (a pipe, a network URL), in place of
    :class:`streamconv.files.publish.AtomicFile`: no temporary file, nothing to publish at the end
    or to take back after a failure (what was written has been read or sent)."""

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


def open_target(spec: str | os.PathLike, *, overwrite: bool = False, protect: Iterable = (),
                format: str | None = None, what: str = "output",
                muxer_options: Mapping[str, str] | None = None,
                ) -> AtomicFile | PipeTarget | SequenceTarget:
    """The target an output spec names, checked (see the module's docstring), with the muxer
    options that will be given to its container (``muxer_options``, FFmpeg's names -> values).

    Raises:
        OutputError: (exit 6) as :func:`streamconv.files.publish.check_output_path` for a file or a
            sequence's files (never for a pipe), or a muxer option the muxer does not have
            (:func:`streamconv.io.ffmpeg.muxer_options.check_muxer_options`); ``spec`` no path,
            ``overwrite`` no bool (a string "no" would replace a file), ``format`` no string,
            ``muxer_options`` no dict.
    """
    check_path(spec, what, OutputError)
    overwrite = check_flag(overwrite, "overwrite", OutputError)
    check_instance(format, (str, type(None)), "format", OutputError,
                   expected="a muxer's name or None")
    muxer_options = check_options(muxer_options, "muxer_options", OutputError)
    scheme = None if is_pipe(spec) else url_scheme(spec)
    if scheme not in (None, "file"):  # not one streamconv sends to (netsink's never come here)
        raise OutputError(f"cannot write {what} {spec}: streamconv does not send to "
                          f"{spec.split(':')[0]}:// URLs (network "
                          "outputs are rtmp://, rtmps://, rtsp://, srt://, udp:// and tcp://; "
                          f"./{spec} names a file)")
    image = not is_pipe(spec) and is_image_output(spec, format)
    named = list(muxer_options)
    if image and named:
        raise OutputError(f"--output-option {named[0]}: {what} {spec} is written image by image by "
                          "streamconv, "
                          f"so no muxer option applies")
    check_muxer_options(output_format(spec, format), spec, named)
    if is_pipe(spec):
        return PipeTarget(spec)
    if image:
        return SequenceTarget(spec, overwrite=overwrite, protect=protect, what=what)
    path = check_output_path(spec, overwrite=overwrite, protect=protect, what=what)
    return AtomicFile(path, overwrite=overwrite, protect=protect, what=what, sweep=True)


def check_target(spec: str | os.PathLike, *, overwrite: bool = False, protect: Iterable = (),
                 format: str | None = None, what: str = "output",
                 muxer_options: Mapping[str, str] | None = None) -> None:
    """Refuse an output before any work, as :func:`open_target` would (nothing is created)."""
    open_target(spec, overwrite=overwrite, protect=protect, format=format, what=what,
                muxer_options=muxer_options)
