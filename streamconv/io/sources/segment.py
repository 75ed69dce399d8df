"""One stretch of a video file, from a keyframe to just before a later one: the source of one
segment of a segmented run (see :mod:`streamconv.jobs.segments`).

:func:`keyframe_times` finds where a file can be cut (demuxing only, nothing decoded),
:func:`plan_cuts` chooses the cuts, and :class:`SegmentSource` decodes the frames between two
of them with the frames' own timestamps, so that the segments' outputs, joined, carry exactly
the frames and pts a one-piece run gives.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Iterator, NamedTuple

import av

from ...errors import InputError
from ...frames.slots import FrameMeta
from ..ffmpeg.container import read_container
from ..ffmpeg.demux import Demux
from ..ffmpeg.log import DamageLog
from .file import FileSource
from .nvdec.source import NvdecSource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Segment:
    """The frames ``start <= pts < end`` of a video stream, in its time base (None: from the
    beginning, to the end), numbered ``index`` from 0; ``shift``: whole seconds added to the
    pts of the frames it delivers, where the file's go below 0 (see :func:`pts_shift`).

    A chain with stages across frames reads the neighbours' frames around the cuts as context
    (delivered with ``FrameMeta.context`` set: filtered, never written): decoding starts at the
    keyframe ``lead`` (None: at ``start``), frames from pts ``before`` on come before ``start``
    (None: none), and ``after`` frames past ``end`` come after it."""

    index: int
    start: int | None
    end: int | None
    shift: int = 0
    lead: int | None = None
    before: int | None = None
    after: int = 0

    def with_context(self, keyframes: Keyframes, behind: int, ahead: int) -> Segment:
        """This segment with ``behind`` frames before its start and ``ahead`` after its end as
        context (one more each side: a frame whose packet has no pts is not counted here), the
        frames found in ``keyframes.frames``; itself where neither is asked for."""
        if not (behind or ahead):
            return self
        frames, lead, before = keyframes.frames, None, None
        if self.start is not None and behind:
            first = frames[max(0, bisect.bisect_left(frames, self.start) - behind - 1)]
            earlier = [pts for pts in keyframes.keyframes if pts <= first]
            lead = earlier[-1] if earlier else keyframes.keyframes[0]
            before = max(first, lead)
        after = ahead + 1 if self.end is not None and ahead else 0
        return replace(self, lead=lead, before=before, after=after)

    def describe(self) -> str:
        """``segment 2 (pts 160 to 320)`` for messages."""
        start = "the start" if self.start is None else self.start
        end = "the end" if self.end is None else self.end
        return f"segment {self.index} (pts {start} to {end})"


class Keyframes(NamedTuple):
    """What :func:`keyframe_times` finds: the keyframes' pts (time-base ticks, ascending), the
    last packet's and the earliest packet's (seconds; None: no packet had one), the demuxer's
    log lines about damage, and whether demuxing found damage otherwise (a packet flagged
    damaged, the file unreadable past some point, streams added mid-file)."""

    keyframes: list[int]
    last: int | None
    earliest: Fraction | None
    reported: int
    damaged: bool = False
    frames: tuple[int, ...] = ()  # every video packet's pts, ascending


def keyframe_times(path: str | Path, video_stream: int = 0) -> Keyframes:
    """The pts of the video stream's keyframe packets, the last and earliest packet's, and the
    demuxer's log lines about damage meanwhile (see :class:`~streamconv.io.ffmpeg.log.DamageLog`);
    demuxes the packets, decodes nothing.

    The segments read the file at once, so their FFmpeg lines, which name the demuxer and not
    the file, could be any one's and are counted by none of them: the demuxer's are counted
    here, over the whole file, as a one-piece run counts them. A file that cannot be read past
    some point yields the keyframes before it: the segments then find the damage as a one-piece
    run does.

    Raises:
        InputError: the file cannot be opened or has no such video stream.
    """
    try:
        container = read_container(str(path))
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise InputError(f"cannot open input {path}: {exc}") from None
    with container:
        videos = container.streams.video
        if not 0 <= video_stream < len(videos):
            raise InputError(f"video stream {video_stream} requested, input has {len(videos)}: "
                             f"{path}")
        keyframes: set[int] = set()
        frames: list[int] = []
        last = first = None
        watch = DamageLog({container.format.name, *container.format.name.split(",")}).start()
        packets = Demux(container, [videos[video_stream]])
        damaged = False
        try:
            for packet in packets:
                damaged = damaged or packet.is_corrupt
                if packet.pts is None:
                    continue
                frames.append(packet.pts)
                last = packet.pts if last is None else max(last, packet.pts)
                first = packet.pts if first is None else min(first, packet.pts)
                if packet.is_keyframe:
                    keyframes.add(packet.pts)
        except (av.FFmpegError, OSError):
            damaged = True  # unreadable from here on: cut among the keyframes before it
        finally:
            watch.stop()
        earliest = None if first is None else first * Fraction(videos[video_stream].time_base)
    return Keyframes(sorted(keyframes), last, earliest, watch.count, damaged
                     or packets.streams_added, tuple(sorted(frames)))


def pts_shift(earliest: Fraction | None) -> int:
    """Whole seconds that bring the earliest pts (seconds) to 0 or above; 0 where none is below
    (MPEG-TS gives pts below 0 before its clock wraps). A part's container would move pts below
    0 up, each part by its own amount: the segments' are moved by this, the joined ones back."""
    return max(0, math.ceil(-earliest)) if earliest is not None else 0


def plan_cuts(keyframes: list[int], last: int | None, segments: int) -> list[Segment]:
    """Up to ``segments`` segments of near equal duration, cut at keyframes.

    Args:
        keyframes: keyframe pts, ascending (see :func:`keyframe_times`).
        last: the last packet's pts (the stream's end, for the durations).
        segments: how many segments are wanted (>= 1).

    Returns:
        The segments in order: the first from the file's start (start None, so frames before the
        first keyframe are kept as a one-piece run keeps them), the last to its end (end None).
        Fewer than asked when there are not as many keyframes after the first one to cut at.
    """
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    cuttable = keyframes[1:] if keyframes else []  # a cut at the first keyframe cuts nothing off
    if not cuttable or last is None or segments == 1:
        return [Segment(0, None, None)]
    begin = keyframes[0]
    cuts: list[int] = []
    for part in range(1, segments):
        target = begin + (last - begin) * part / segments
        later = segments - 1 - part  # cuts still to come: leave a keyframe for each
        room = cuttable[:len(cuttable) - later] if len(cuttable) > later else cuttable[:1]
        if not room:
            break
        chosen = min(room, key=lambda pts: abs(pts - target))
        cuts.append(chosen)
        cuttable = [pts for pts in cuttable if pts > chosen]
    bounds = [None, *cuts, None]
    return [Segment(i, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


class SegmentSource(FileSource):
    """A FileSource that delivers only the frames of one :class:`Segment` of the file.

    The file is sought to the segment's start keyframe before anything is decoded (the first
    frame, decoded on opening, is the segment's), frames before the start are skipped and
    reading ends at the first frame at or after the end. Frames are (H, W, 3) RGB or planes in
    host memory with the input's own pts and time base, exactly as :class:`FileSource` gives
    them. Audio and subtitles are never carried: a segmented run copies them once, when the
    segments are joined.

    Args:
        path: the input file.
        segment: which frames.
        options: FileSource's keyword options (``copy_streams`` is always False).
    """

    name = "segment"

    def __init__(self, path: str | Path, segment: Segment, **options) -> None:
        self.segment = segment
        options["copy_streams"] = False
        super().__init__(path, **options)

    def _decode(self) -> Iterator[av.VideoFrame]:
        """The file's frames from the segment's start keyframe (or its context's) to just before
        its end (or its context's)."""
        segment = self.segment
        end = segment.end
        first = segment.start if segment.before is None else segment.before
        if self._first_keyframe is not None:
            self._seek_to(self._first_keyframe)
        past_end = 0
        for frame in super()._decode():
            if frame.pts is not None and first is not None and frame.pts < first:
                # a frame before the cut (an open GOP's leading one): the previous segment's
                continue
            if frame.pts is not None and end is not None and frame.pts >= end:
                if past_end >= segment.after:
                    return  # frames come out in pts order: the rest are the next segment's
                past_end += 1
            yield frame

    @property
    def _first_keyframe(self) -> int | None:
        """The keyframe decoding starts at (None: the file's start)."""
        return self.segment.start if self.segment.lead is None else self.segment.lead

    def _video_packets(self) -> Iterator[av.Packet]:
        """FileSource's packets from the segment's first keyframe on: a seek can land on packets
        before it (MPEG-TS lands on any packet, not a keyframe), which are the previous
        segment's and would not decode without theirs."""
        packets = super()._video_packets()
        if self._first_keyframe is not None:
            for packet in packets:
                if packet.is_keyframe and packet.pts == self._first_keyframe:
                    yield packet
                    break
        yield from packets

    def _seek_to(self, start: int) -> None:
        """Seek so that demuxing reaches the keyframe at ``start`` before any later packet. Some
        demuxers land past it, or on a packet that is no keyframe (MPEG-TS seeks by any packet's
        dts): each landing is probed on packets alone, before any decoder sees one, and the seek
        backs off further, twice as far each time.

        Raises:
            InputError: the file cannot be sought, or not to that keyframe even far before it
                (the segment's first frames would be lost).
        """
        target, step, landed, good = start, 1, None, True
        for _attempt in range(48):
            self._seek(target)
            good, landed = self._reaches_keyframe(start)
            if good:
                break
            step = max(2 * step, 2 * (landed - target) if landed is not None else 0)
            target -= step
        if not good:
            raise InputError(f"cannot seek {self.path} to its keyframe at pts {start} (the demuxer "
                             "gives "
                             f"{landed} at best): its segments would lose frames; run it in one "
                             "piece")
        self._seek(target)  # again: the probe consumed packets

    def _seek(self, target: int) -> None:
        """Seek to the keyframe at or before pts ``target``, as the demuxer finds it."""
        try:
            self._container.seek(target, stream=self._stream, backward=True)
        except (av.FFmpegError, OSError, OverflowError) as exc:  # (backed off past any pts)
            raise InputError(f"cannot seek {self.path} to pts {target}: {exc}") from None

    def _reaches_keyframe(self, start: int) -> tuple[bool, int | None]:
        """Whether demuxing from here reaches the keyframe at pts ``start`` before any packet
        shown after it, and the first packet's pts (None: no packet); the packets read are
        consumed."""
        first = None
        for packet in Demux(self._container, [self._stream]):
            found = packet.pts if packet.pts is not None else packet.dts
            if not packet.size or found is None:
                continue
            first = found if first is None else first
            if found >= start:
                return packet.is_keyframe and found == start, first
        return False, first

    def _frame_meta(self, frame) -> FrameMeta:
        """FileSource's, the pts moved by the segment's shift; a frame outside the segment is
        context (see :class:`Segment`)."""
        meta = super()._frame_meta(frame)
        start, end = self.segment.start, self.segment.end
        if meta.pts is not None:
            meta.context = (start is not None and meta.pts < start) or \
                (end is not None and meta.pts >= end)
        if self.segment.shift and meta.pts is not None:
            meta.pts += round(self.segment.shift / meta.time_base)
        return meta

    def _set_timing(self) -> None:
        """As FileSource, but a segment that stops before the file's end is not short of its
        header's duration (that is judged by the last segment), and its frame count is unknown."""
        super()._set_timing()
        if self.segment.end is not None:
            self._damage.declared_end = None
        if self.segment.start is not None or self.segment.end is not None:
            self.frame_count = None

    def describe(self) -> str:
        return f"{super().describe()}, {self.segment.describe()}"


class NvdecSegmentSource(SegmentSource, NvdecSource):
    """A :class:`SegmentSource` decoded on the GPU by NVDEC: the seek and the segment's bounds of
    SegmentSource, around NvdecSource's decoding; frames left in device memory as NvdecSource's,
    in display order, each segment its own decoder session.

    Args:
        path, segment: as SegmentSource.
        options: NvdecSource's (``device`` among them) and FileSource's keyword options.
    """

    name = "nvdec segment"


def segment_source(path: str | Path, segment: Segment, *, decoder: str = "cpu",
                   **options) -> SegmentSource:
    """The source of one segment: decoded by libavcodec (``decoder`` "cpu", frames in host
    memory) or by NVDEC ("nvdec", on ``options["device"]``, frames in device memory)."""
    if decoder == "nvdec":
        return NvdecSegmentSource(path, segment, **options)
    options.pop("device", None)
    return SegmentSource(path, segment, **options)
