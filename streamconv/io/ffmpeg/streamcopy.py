"""Audio and subtitle streams copied unchanged from an input file to a file output.

:class:`CopiedStreams` (kept by a FileSource) sorts the input's audio and subtitle streams
into those copied and those left out (a codec FFmpeg does not know, or parameters a muxer needs
that damaged packets left unset), keeps their packets until the frame they travel with is read
(``FrameMeta.packets``), and decodes copied audio, the samples dropped, so damage in it is seen,
not only passed on. The output's side is streamconv.io.ffmpeg.copyout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import av

from .damage import missing_parameters

log = logging.getLogger(__name__)


class CopiedStreams:
    """The audio/subtitle streams of one input on their way to a file output.

    Args:
        path: the input (for messages).
        wanted: the input's audio and subtitle streams (PyAV) asked to be copied.
        truncated: how the input file is cut short (see damage.truncation), or None.

    Attributes:
        streams: the streams copied (the others are left out with a warning).
        counted_streams: the streams whose packets are read: those copied, and those left
            out for want of parameters (to tell "no packets at all" from "packets that say
            too little" in :meth:`stream_damage`).
        damaged: copied packets flagged by the demuxer or failing to decode: copied as they are.
    """

    def __init__(self, path: str, wanted: Sequence, truncated: str | None) -> None:
        self.path = path
        missing = {s.index: missing_parameters(s) for s in wanted if s.codec_context is not None}
        self._undescribed: list[str] = []  # streams left out of a cut file for want of a codec
        self.streams = [s for s in wanted if s.index in missing and not missing[s.index]]
        self._copied = {s.index for s in self.streams}
        self._report_left_out(wanted, missing, truncated)
        self.counted_streams = [s for s in wanted if s.index in missing]
        # Kept as numbers: damage is asked after the input is closed, when the streams are gone.
        self._counted = [(s.index, s.type, missing[s.index]) for s in self.counted_streams]
        self._stream_packets: dict[int, int] = {}  # packets demuxed per stream index
        self._unchecked: set[int] = set()  # copied audio streams FFmpeg has no decoder for
        self._packets: list = []  # copied-stream packets read since the last frame
        self.damaged = 0
        self.admit: Callable[[av.Packet], bool] | None = None  # a cut's say (io.trim)

    def _report_left_out(self, wanted: Sequence, missing: dict[int, str | None],
                         truncated: str | None) -> None:
        """Warn of the streams that are not copied: a codec FFmpeg does not know (not damage),
        or parameters that could not be found (see damage.missing_parameters)."""
        for stream in wanted:
            if stream.index not in missing and truncated:  # its description was cut off
                log.warning("%s: %s stream %d has no codec parameters (the file is cut short); not "
                            "copied",
                            self.path, stream.type, stream.index)
                self._undescribed.append(f"{stream.type} stream {stream.index} was left out: its "
                                         "description "
                                         f"is cut off")
            elif stream.index not in missing:
                log.warning("%s: %s stream %d is of a codec FFmpeg does not know; not copied",
                            self.path, stream.type, stream.index)
            elif missing[stream.index]:
                log.warning("%s: %s stream %d (%s) has no %s (its packets are damaged or missing); "
                            "not copied", self.path, stream.type, stream.index,
                            stream.codec_context.name, missing[stream.index])

    def keep(self, packet) -> None:
        """Count a packet of a counted stream (see :meth:`check`) and keep it for the output if
        its stream is copied (and ``admit``, where set, takes it)."""
        if self.check(packet) and (self.admit is None or self.admit(packet)):
            self._packets.append(packet)

    def check(self, packet) -> bool:
        """Count a packet of a counted stream; whether its stream is copied. Copied audio is
        decoded, the samples dropped, so damage in it is seen."""
        stream = packet.stream
        self._stream_packets[stream.index] = self._stream_packets.get(stream.index, 0) + 1
        if stream.index not in self._copied:
            return False
        damaged = packet.is_corrupt
        if stream.type == "audio" and stream.index not in self._unchecked:
            try:
                packet.decode()
            except av.InvalidDataError:
                damaged = True
            except av.FFmpegError:
                self._unchecked.add(stream.index)  # no decoder for it here: copied unchecked
        self.damaged += damaged
        return True

    def take(self, until: float | None = None) -> list:
        """The packets kept and not yet handed on that start before ``until`` seconds (None:
        all of them, as after the last frame); the later ones wait for a later frame."""
        if until is None:
            packets, self._packets = self._packets, []
            return packets
        due, waiting = [], []
        for packet in self._packets:
            stamp = packet.pts if packet.pts is not None else packet.dts
            late = stamp is not None and packet.time_base is not None and \
                stamp * packet.time_base >= until
            (waiting if late else due).append(packet)
        self._packets = waiting
        return due

    def stream_damage(self, ended: bool) -> list[str]:
        """Phrases for the damage report: streams left out of a cut file, streams left out for
        want of parameters, and (once the input ``ended``) audio streams that had no packets."""
        found = list(self._undescribed)
        for index, kind, missing in self._counted:
            empty = ended and not self._stream_packets.get(index)
            if missing:
                why = "it had no packets" if empty else f"its {missing} could not be found"
                found.append(f"{kind} stream {index} was left out: {why}")
            elif empty and kind == "audio":  # an empty subtitle track is common in intact files
                found.append(f"{kind} stream {index} had no packets")
        return found
