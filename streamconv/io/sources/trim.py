"""A stretch of an input, cut as ``ffmpeg -ss START -t DURATION -i IN`` cuts it when the video is
re-encoded and the audio copied: the same frames, timestamps and copied packets.

What FFmpeg's command-line tool does with input ``-ss``/``-t``/``-to`` (fftools, 5.1 to 8):

- Timestamps: every stream's move by -(START + the input's start time), so the cut starts at 0
  (without -ss, by the start time alone). The move is rescaled to each stream's time base,
  rounded to the nearest tick.
- The seek: to START + the start time, backward, every stream at once (the demuxer chooses where
  each lands), 3/23 s earlier where a stream reorders frames and the demuxer seeks by dts.
- Video: decoded from where the seek lands, frames before 0 dropped (accurate to the frame, not
  to the keyframe); the cut ends at the first frame DURATION or more after the first one kept.
  The frames kept are timed in ticks of 1/frame rate (the encoder's time base), each pts
  rounded to the nearest tick.
- Copied streams: every packet from where the seek lands, those before 0 too (FFmpeg's
  ``copy_prior_start`` default; players start them with the video); a stream ends at its first
  packet whose dts is DURATION or more.

A stream that cannot seek (a pipe) is read from its start, every frame before START dropped.
Damage the decoder reports before the first frame kept (an MPEG-TS seek lands on any packet,
not a keyframe) is not the cut's.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av

from ...errors import InputError
from .demuxed import DemuxedSource
from .file import FileSource

log = logging.getLogger(__name__)

MICROSECOND = Fraction(1, 1_000_000)
"""FFmpeg's AV_TIME_BASE_Q: the unit of a Trim's times and of a container's start time."""

_SEEKS_BY_PTS = 0x4000000  # AVFMT_SEEK_TO_PTS: the demuxer seeks by pts (MP4), not dts
_DTS_MARGIN = 3 * 1_000_000 // 23  # how much earlier FFmpeg seeks where dts trail the pts

_CLOCK = re.compile(r"(?:(\d+):)?(\d+):(\d+(?:\.\d*)?)")
_SECONDS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(s|ms|us)?")
_UNITS: dict[str | None, Fraction] = {None: Fraction(1), "s": Fraction(1),
                                      "ms": Fraction(1, 1000), "us": MICROSECOND}


def parse_time(text: str) -> int:
    """A time or duration as FFmpeg writes them (``90``, ``1.5``, ``500ms``, ``01:30``,
    ``1:02:03.25``), in microseconds (a finer fraction is cut off, as FFmpeg cuts it).

    Raises:
        ValueError: not such a time, or negative.
    """
    clock = _CLOCK.fullmatch(text.strip())
    if clock:
        hours, minutes, seconds = int(clock[1] or 0), int(clock[2]), Fraction(clock[3])
        value = (hours * 60 + minutes) * 60 + seconds
    else:
        plain = _SECONDS.fullmatch(text.strip())
        if not plain:
            raise ValueError(f"expected a time such as 90, 1.5, 500ms, 01:30 or 1:02:03.5, "
                             f"got {text!r}")
        value = Fraction(plain[1]) * _UNITS[plain[2]]
    return math.floor(value / MICROSECOND)


def rescale(value: int, source: Fraction, target: Fraction) -> int:
    """``value`` ticks of ``source`` in ticks of ``target``, the nearest, halves away from 0
    (FFmpeg's av_rescale_q)."""
    exact = value * Fraction(source) / Fraction(target)
    whole = math.floor(abs(exact) + Fraction(1, 2))
    return whole if exact >= 0 else -whole


@dataclass(frozen=True)
class Trim:
    """Which stretch of an input to read: from ``start``, for ``duration`` (microseconds each;
    None: from the beginning, to the end). :meth:`of` makes one as -ss, -t and -to say it."""

    start: int | None = None
    duration: int | None = None

    @classmethod
    def of(cls, start: int | None = None, duration: int | None = None,
           stop: int | None = None) -> Trim | None:
        """The Trim of -ss ``start``, -t ``duration`` or -to ``stop`` (microseconds each), or
        None where none is given.

        Raises:
            ValueError: both a duration and a stop, a stop not after the start, or a duration
                of 0.
        """
        if duration is not None and stop is not None:
            raise ValueError("-t and -to both say where the cut ends: give one")
        if stop is not None:
            if stop <= (start or 0):
                raise ValueError(f"-to {float(stop * MICROSECOND):g} s is not after -ss "
                                 f"{float((start or 0) * MICROSECOND):g} s")
            duration = stop - (start or 0)
        if duration == 0:
            raise ValueError("-t 0 leaves no frame")
        return None if start is None and duration is None else cls(start, duration)

    def describe(self) -> str:
        """``from 1.5 s for 2 s`` for messages."""
        parts = [] if self.start is None else [f"from {float(self.start * MICROSECOND):g} s"]
        if self.duration is not None:
            parts.append(f"for {float(self.duration * MICROSECOND):g} s")
        return " ".join(parts)


class TrimClock:
    """One opened input's cut: the move of its timestamps, where its frames and copied packets
    fall (see the module's docstring).

    Args:
        trim: the stretch asked for.
        container: the input (PyAV), opened, nothing read from it yet.
        copied: the indices of its streams whose packets are copied.
        grid: the time base the frames kept are given (1/frame rate).
    """

    def __init__(self, trim: Trim, container, copied: set[int], grid: Fraction) -> None:
        self.trim = trim
        self.grid = grid
        self.offset = -(trim.start or 0) - (container.start_time or 0)  # microseconds
        self.dropped = 0  # frames decoded before the start
        self._copied = set(copied)
        self._ended: set[int] = set()  # copied streams past the cut's end
        self._first: int | None = None  # the pts of the first frame kept (moved)

    def seek(self, container, path: str) -> None:
        """Seek ``container`` as FFmpeg does for -ss (nothing without one); an input that cannot
        seek is read from its start."""
        if self.trim.start is None:
            return
        target = self.trim.start + (container.start_time or 0)
        streams = container.streams
        reorders = any(s.type == "video" and s.codec_context.has_b_frames for s in streams)
        if reorders and not container.format.flags & _SEEKS_BY_PTS:
            target -= _DTS_MARGIN
        try:
            container.seek(target, backward=True)
        except (av.FFmpegError, OSError) as exc:
            log.warning("%s cannot seek (%s): decoding from its start to -ss", path, exc)

    def place(self, frame) -> bool | None:
        """Move a decoded frame's pts; whether it is inside the cut (True: then its pts is in
        ticks of ``grid``), before it (False), or the first after it (None: no later frame
        is)."""
        if frame.pts is None:
            return self.trim.start is None  # FFmpeg's trim keeps no frame it cannot place
        frame.pts += rescale(self.offset, MICROSECOND, frame.time_base)
        if self.trim.start is not None and frame.pts < 0:
            self.dropped += 1
            return False
        if self._first is None:
            self._first = frame.pts
        duration = self.trim.duration
        if duration is not None and \
                frame.pts - self._first >= rescale(duration, MICROSECOND, frame.time_base):
            return None
        frame.pts, frame.time_base = rescale(frame.pts, frame.time_base, self.grid), self.grid
        return True

    def admit(self, packet: av.Packet) -> bool:
        """Move a copied stream's packet's timestamps; whether it is inside the cut."""
        index, base = packet.stream.index, packet.time_base
        if index in self._ended:
            return False
        shift = rescale(self.offset, MICROSECOND, base)
        if packet.pts is not None:
            packet.pts += shift
        if packet.dts is not None:
            packet.dts += shift
        stamp = packet.dts if packet.dts is not None else packet.pts
        if self.trim.duration is not None and stamp is not None and \
                rescale(stamp, base, MICROSECOND) >= self.trim.duration:
            self._ended.add(index)
            return False
        return True

    @property
    def copying(self) -> bool:
        """Whether a copied stream may still have packets inside the cut."""
        return bool(self._copied - self._ended)


class TrimmedFileSource(FileSource):
    """A :class:`FileSource` that reads only a :class:`Trim` of its input (``trim=``, then
    FileSource's options); before DemuxedSource, the same for a pipe, raw video or an image
    sequence (:class:`TrimmedDemuxedSource`).

    Frames are the FileSource's, (H, W, 3) RGB or planes in host memory, with their pts moved so
    that the cut starts at 0, in ticks of 1/frame rate; the copied packets' timestamps move alike.
    """

    def __init__(self, path, *, trim: Trim, **options) -> None:
        self.trim = trim
        self._past_end = False
        super().__init__(path, **options)

    def _decode(self) -> Iterator:
        """The frames inside the cut; after its end, the copied streams are read on to theirs."""
        stream = self._stream
        self.time_base = 1 / Fraction(stream.guessed_rate or stream.average_rate or 25)
        clock = self._clock = TrimClock(self.trim, self._container,
                                        {s.index for s in self._copies.streams}, self.time_base)
        clock.seek(self._container, self.path)
        self._copies.admit = clock.admit
        frames, kept = super()._decode(), 0
        for frame in frames:
            placed = clock.place(frame)
            if placed is None:
                break
            if placed:
                if not kept:
                    self._forget_damage()
                kept += 1
                yield frame
        else:
            return
        self._past_end = True
        for _ in frames:  # video packets are no longer decoded (see _video_packets)
            pass

    def _video_packets(self) -> Iterator[av.Packet]:
        """The FileSource's video packets until the cut's end; then none, while the copied
        packets are still read (and kept, or not, by TrimClock.admit) until every copied stream
        is past the cut."""
        for packet in super()._video_packets():
            if not self._past_end:
                yield packet
            elif not self._clock.copying:
                return

    def _forget_damage(self) -> None:
        """Forget what the decoder reported before the first frame of the cut: those frames
        are not the cut's (an MPEG-TS seek lands on any packet, and the decoder complains of
        the frames it meets before a keyframe)."""
        self._damage.forget_decoding()
        self._damage_log.count = 0

    def _first_frame(self):
        """The first frame of the cut; a start past the input's last frame is named."""
        try:
            return super()._first_frame()
        except InputError:
            if not self._clock.dropped:  # nothing before the start either: not the cut's doing
                raise
            raise InputError(f"{self.path} has no frame at or after -ss "
                             f"{float(self.trim.start * MICROSECOND):g} s ({self._clock.dropped} "
                             f"decoded before it)") from None

    def _set_timing(self) -> None:
        """The FileSource's timing, but frames timed in ticks of 1/frame rate (see
        :meth:`_decode`); the frame count is the cut's (about), and the header's end moves with
        the timestamps (kept to judge a short file only where the cut reaches it)."""
        grid = self.time_base
        super()._set_timing()
        self.time_base = grid
        rate = float(self.frame_rate)
        if self.frame_count:
            start = 0 if self.trim.start is None else self.trim.start * MICROSECOND * rate
            count = self.frame_count - math.floor(start)
            if self.trim.duration is not None:
                count = min(count, math.ceil(self.trim.duration * MICROSECOND * rate))
            self.frame_count = max(count, 0) or None
        end = self._damage.declared_end
        if end is not None:
            end += float(self._clock.offset * MICROSECOND)
            reaches = self.trim.duration is None or end < self.trim.duration * MICROSECOND
            self._damage.declared_end = end if reaches else None

    def describe(self) -> str:
        return f"{super().describe()}, {self.trim.describe()}"


class TrimmedDemuxedSource(TrimmedFileSource, DemuxedSource):
    """A :class:`DemuxedSource` (a pipe, raw video, an image sequence) of a :class:`Trim` of its
    input (``trim=``, then DemuxedSource's options)."""


def open_trimmed(path: str, trim: Trim, *, demuxed: bool, **options) -> FileSource:
    """The source of ``trim`` of ``path``: read with a named demuxer (``demuxed``: see
    :attr:`streamconv.io.spec.SourceSpec.is_demuxed`) or as a file, with those classes' options."""
    kind = TrimmedDemuxedSource if demuxed else TrimmedFileSource
    return kind(path, trim=trim, **options)
