"""What a SOURCE or ``-o`` string means, decided once: a SourceSpec or an OutputSpec, a kind and
its fields.

:func:`parse_source` and :func:`parse_output` are the only places that tell a camera from a file
or a network URL from a path; :mod:`streamconv.io.open` opens a spec through a table from kind to
opener, and the command's checks ask the spec (``spec.kind``, ``spec.takes_muxer_options``, ...).
A new kind of source or sink is its module, a kind here and a row in that table. Parsing reads
no file and imports no codec library.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..files.publish import without_file_scheme
from .ffmpeg.formats import NETWORK_CONTAINERS, is_image_output, is_pipe, is_sequence, url_scheme

SOURCE_KINDS = ("pattern", "camera", "pipe", "sequence", "demuxed", "url", "file")
"""What a SOURCE can be: the built-in test pattern, a camera, standard input (or another pipe),
an image sequence, any input read with a named demuxer (``--input-format``), a URL, a file."""

OUTPUT_KINDS = ("null", "vcam", "network", "pipe", "sequence", "image", "file")
"""What an output can be: discarded, a virtual camera, a network URL streamconv sends to,
standard output (or another pipe), an image sequence, one image, a file."""

WEBCAM_SPEC = re.compile(r"^(?:webcam(?::(?P<target>.+))?|(?P<path>/dev/video\d+))$")
"""``webcam``, ``webcam:N``, ``webcam:PATH`` and ``/dev/videoN``."""

VCAM_SPEC = re.compile(r"^vcam(?::(?P<device>.+))?$")
"""``vcam`` and ``vcam:DEVICE``."""

_DEMUXED = ("pipe", "sequence", "demuxed")


@dataclass(frozen=True)
class SourceSpec:
    """A SOURCE argument, parsed.

    Attributes:
        text: the argument as given.
        kind: one of :data:`SOURCE_KINDS`.
        format: the demuxer named for it (``--input-format``), or None.
    """

    text: str
    kind: str
    format: str | None = None

    @property
    def decodes_a_stream(self) -> bool:
        """Whether FFmpeg reads it (a file, pipe, sequence or URL): the decoder, hardware
        decoding, demuxer and input options apply; not to a camera or the test pattern."""
        return self.kind not in ("pattern", "camera")

    @property
    def is_demuxed(self) -> bool:
        """Whether it is read with a named or implied demuxer (a pipe, an image sequence, or any
        input with ``--input-format``): :class:`streamconv.io.sources.demuxed.DemuxedSource`."""
        return self.kind in _DEMUXED

    @property
    def is_url(self) -> bool:
        """Whether it is a URL (``rtsp://``, ``srt://``, ``file://``...), read with a demuxer
        named or not: what ``--reconnect`` reopens, and what a segmented run does not cut."""
        return "://" in self.text

    @property
    def is_live(self) -> bool:
        """Whether its frames come on their own clock: a camera, or the live test pattern."""
        return self.kind == "camera" or (self.kind == "pattern" and self.text.endswith(",live"))

    @property
    def takes_rate(self) -> bool:
        """Whether ``--fps`` applies: a camera, raw video or another named demuxer, an image
        sequence."""
        return self.kind == "camera" or self.format is not None or is_sequence(self.text)

    @property
    def takes_size(self) -> bool:
        """Whether ``--size`` applies: a camera, or raw video (which has no header)."""
        return self.kind == "camera" or self.format == "rawvideo"

    @property
    def is_local_file(self) -> bool:
        """Whether it is a local file (a segmented run cuts one at its keyframes)."""
        return self.kind == "file"


@dataclass(frozen=True)
class OutputSpec:
    """An ``-o`` argument (None: no output), parsed.

    Attributes:
        text: the argument as given (None: none).
        kind: one of :data:`OUTPUT_KINDS`.
        target: where it goes: the path (``file:`` taken off), the URL, the pipe, the virtual
            camera's device (None: the first one pyvirtualcam finds), None when discarded.
        format: the container named for it (``--format``), or None.
    """

    text: str | None
    kind: str
    target: str | None = None
    format: str | None = None

    @property
    def writes_a_file(self) -> bool:
        """Whether it is written as a file (a file, a pipe, an image or image sequence: checked
        and published whole); not a network URL (sent as written), a virtual camera or null."""
        return self.kind in ("file", "pipe", "sequence", "image")

    @property
    def takes_muxer_options(self) -> bool:
        """Whether ``--format`` and ``--output-option`` apply: anything a muxer writes."""
        return self.kind in ("file", "pipe", "sequence", "image", "network")

    @property
    def is_one_file(self) -> bool:
        """Whether it is one file that can be written whole, joined from parts (a segmented
        run's output): not a pipe, an image, a URL or a camera."""
        return self.kind == "file"


def is_test_spec(text: str) -> bool:
    """Whether a SOURCE names the built-in test pattern (``test``, ``test:...``)."""
    return text == "test" or text.startswith(("test:", "test@", "test,"))


def is_webcam_spec(text: str) -> bool:
    """Whether a SOURCE names a camera (``webcam``, ``webcam:N``, ``webcam:PATH``,
    ``/dev/videoN``)."""
    return WEBCAM_SPEC.match(str(text).strip()) is not None


def network_scheme(output: str | os.PathLike | None) -> str | None:
    """The network scheme of an output (``"rtmp"``, ``"udp"``, ...), lower case, or None for a
    file, a ``file:`` URL or another scheme."""
    scheme = url_scheme(output)
    return scheme if scheme in NETWORK_CONTAINERS else None


def parse_source(text: str | os.PathLike, *, format: str | None = None) -> SourceSpec:
    """What a SOURCE argument is (``format``: the demuxer named for it, which makes any input a
    demuxed one)."""
    text = os.fspath(text)
    if is_test_spec(text):
        return SourceSpec(text, "pattern")
    if is_webcam_spec(text):
        return SourceSpec(text, "camera")
    if format is not None:
        return SourceSpec(text, "demuxed", format)
    if is_pipe(text):
        return SourceSpec(text, "pipe")
    if is_sequence(text):
        return SourceSpec(text, "sequence")
    return SourceSpec(text, "url" if "://" in text else "file")


def parse_output(text: str | os.PathLike | None, *, format: str | None = None) -> OutputSpec:
    """What an ``-o`` argument is (``format``: the container named for it)."""
    if text is None or os.fspath(text) == "null":
        return OutputSpec(None if text is None else "null", "null")
    name = os.fspath(text)
    vcam = VCAM_SPEC.match(name)
    if vcam is not None:
        return OutputSpec(name, "vcam", vcam["device"])
    if not isinstance(text, str):  # a path object is a path: no scheme, no file: prefix
        return OutputSpec(name, _file_kind(name, format), name, format)
    if network_scheme(text) is not None:
        return OutputSpec(text, "network", text, format)
    path = without_file_scheme(text)
    return OutputSpec(text, _file_kind(path, format), path, format)


def _file_kind(path: str, format: str | None) -> str:
    if is_pipe(path):
        return "pipe"
    if is_sequence(path, format):
        return "sequence"
    return "image" if is_image_output(path, format) else "file"
