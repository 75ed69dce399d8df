"""The input's tags carried to a file output: the container's, the video stream's, the copied
streams'.

A tag is carried unless it would be false of the output: the writing application and encoder
(``encoder``, MOV's ``vendor_id``: the muxer and encoder write their own, and MOV would name the
old encoder as the video's compressor), the input file's brands, durations, and Matroska's
statistics tags (``BPS``, ``NUMBER_OF_FRAMES``, ...), which describe the input's packets (a run
stopped early writes fewer). Copied streams keep their ``encoder``: their packets are the
input's. Each muxer stores what its container holds (MP4: language and handler name per stream,
the title as the track's name, and the common container tags; Matroska: every tag, the language
and title as the track's own) and leaves out the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Mapping

import av

from .signalling import HdrMetadata

# Compared lower-case, without Matroska's "-lng" language suffix.
_STALE = frozenset({"encoder", "vendor_id", "major_brand", "minor_version", "compatible_brands",
                    "duration",
                    "bps", "number_of_frames", "number_of_bytes", "_statistics_writing_app",
                    "_statistics_writing_date_utc", "_statistics_tags"})


def carried_tags(tags: Mapping[str, str], *, encoded: bool,
                 from_mov: bool = False) -> dict[str, str]:
    """The ``tags`` (a stream's or a container's metadata) still true of the output.

    Args:
        encoded: the stream (or file) is written anew, so its ``encoder`` tag is dropped too.
        from_mov: the tags are a stream's of an MP4/MOV input, whose demuxer names the track's
            title ``name``: it is carried as ``title``, which every muxer takes.
    """
    kept = {}
    for key, value in tags.items():
        base = key.split("-", 1)[0].lower()
        if base in _STALE and (encoded or base != "encoder"):
            continue
        kept[key] = value
    if from_mov and "name" in kept and "title" not in kept:
        kept["title"] = kept.pop("name")
    return kept


def stream_tags(stream, *, encoded: bool) -> dict[str, str]:
    """The tags of an input stream (PyAV) to give its output stream (see :func:`carried_tags`)."""
    return carried_tags(stream.metadata, encoded=encoded,
                        from_mov="mov" in stream.container.format.name)


@dataclass(frozen=True)
class InputMetadata:
    """What a file output takes over from its input besides the pictures and copied packets.

    Attributes:
        container: the input file's tags carried (title, comment, ...).
        video: the video stream's tags carried (language, handler_name, title, ...).
        hdr: the video's HDR10 mastering display and content light level, or None.
        sample_aspect_ratio: the width of a pixel over its height (16/15 for anamorphic 4:3 PAL
            DVD video), or None: square or not given.
    """

    container: dict[str, str] = field(default_factory=dict)
    video: dict[str, str] = field(default_factory=dict)
    hdr: HdrMetadata | None = None
    sample_aspect_ratio: Fraction | None = None

    @classmethod
    def of(cls, container, stream, frame: av.VideoFrame) -> "InputMetadata":
        """The metadata of an open input ``container``, its decoded video ``stream`` and a frame
        of it decoded by libavcodec (host memory; its side data holds the HDR metadata, whether
        the bitstream or the container gave it)."""
        return cls(carried_tags(container.metadata, encoded=True),
                   stream_tags(stream, encoded=True),
                   HdrMetadata.of(frame), stream.sample_aspect_ratio or None)

    def stretched(self, stretch: Fraction) -> "InputMetadata":
        """These tags for pixels made ``stretch`` times wider for their height (a scale stage
        that changes the sides' ratio, :func:`streamconv.chain.resample.pixel_stretch`): the
        input's non-square pixels keep their display aspect ratio; square or unknown ones stay
        untagged, as the frames' own size is the one asked for."""
        if self.sample_aspect_ratio is None or self.sample_aspect_ratio == 1 or stretch == 1:
            return self
        return replace(self, sample_aspect_ratio=self.sample_aspect_ratio * stretch)

    def tag(self, container, stream) -> None:
        """Give an output ``container`` and its video ``stream`` (PyAV, before the header is
        written) these tags, and the pixels' aspect ratio (the frames are written at their stored
        size, so players stretch them as they stretched the input's)."""
        container.metadata.update(self.container)
        stream.metadata.update(self.video)
        if self.sample_aspect_ratio is not None and self.sample_aspect_ratio != 1:
            # Into the bitstream (H.264's VUI) and MP4's pasp. PyAV cannot set the stream's own,
            # which Matroska's display size takes: VP9 in WebM loses it.
            stream.codec_context.sample_aspect_ratio = self.sample_aspect_ratio
