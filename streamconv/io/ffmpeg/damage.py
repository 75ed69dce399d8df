"""Judging an input's damage, from what its container and streams declare and what reading it found.

A cut or damaged file often decodes without a single error: the frames after a cut are simply
not there, and a lost MPEG-TS audio packet leaves no trace in the decoder. So the container's
own structure is read again here (an MP4/MOV box, a Matroska segment, an MPEG-TS packet that
the file ends inside of; TS packet headers for lost sync, transmission errors and continuity
skips), a video stream's declared end is found to compare with where its frames really end,
and audio is checked for the parameters a muxer needs before its packets can be copied. Each
judgment is a plain function of a path or a PyAV stream that returns a phrase for the damage
report (or None / an empty list where nothing is wrong or nothing can be told).

:class:`InputDamage` keeps what one input's reader (streamconv.io.sources.file.FileSource) counts as
it goes, calls those judgments, and says it all in the phrases of the damage report.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

import numpy as np


def missing_parameters(stream) -> str | None:
    """What an input stream (PyAV) lacks for a muxer to take its packets: "codec" (none FFmpeg
    knows), or for audio "sample rate" and/or "channels"; None when nothing. Audio parameters
    come from the packets, so damaged or missing packets leave them unset, and a muxer refuses
    to start a file with such a stream."""
    context = stream.codec_context
    if context is None:
        return "codec"
    if stream.type != "audio":
        return None
    missing = [name for name in ("sample_rate", "channels") if not getattr(context, name, 0)]
    return " and ".join(name.replace("_", " ") for name in missing) or None


def declared_end(stream, format_name: str) -> float | None:
    """When a video stream (PyAV) ends, in seconds from 0, as its header declares it, or None
    where none is declared; ``format_name`` is the container's (FFmpeg's, e.g. "mov,mp4,...").

    MP4 (and TS, where FFmpeg measures it) give the stream's duration, counted from its start.
    Matroska declares none but a DURATION tag, which FFmpeg's muxer writes as the stream's end
    (other muxers' tags are durations: taken as an end, one is never later than the true end,
    so intact video cannot look short); a Matroska stream's own duration is FFmpeg's guess
    from the whole file's, which a longer audio stream makes too long."""
    if "matroska" not in format_name.split(","):
        if stream.duration and stream.time_base:
            return float((stream.duration + (stream.start_time or 0)) * stream.time_base)
        return None
    tag = re.fullmatch(r"(\d+):(\d\d):(\d\d(?:\.\d+)?)",
                       (stream.metadata or {}).get("DURATION", ""))
    if tag:
        return int(tag[1]) * 3600 + int(tag[2]) * 60 + float(tag[3])
    return None


def truncation(path: str, format_name: str) -> str | None:
    """How a local file is cut short, from its container's own structure (``format_name``:
    FFmpeg's name for it): an MP4/MOV box or a Matroska segment declaring more bytes than the
    file holds, or an MPEG-TS file ending inside a transport packet. Reads the file's box or
    element headers, or its first and last transport packets. Returns a phrase for the damage
    report, or None: not cut, or nothing to tell by (other containers, a URL, a pipe, a
    Matroska segment of unknown size, a TS cut exactly between two packets, a read error)."""
    if "://" in path:
        return None
    names = set(format_name.split(","))
    check = (_mp4_truncation if names & {"mov", "mp4"} else
             _matroska_truncation if names & {"matroska", "webm"} else
             _ts_truncation if "mpegts" in names else None)
    try:
        if check is None or not Path(path).is_file():
            return None
        with open(path, "rb") as file:
            return check(file, os.fstat(file.fileno()).st_size)
    except OSError:
        return None


_BOX_NAMES = {b"moov": "index", b"mdat": "media data", b"moof": "fragment header"}


def _mp4_truncation(file, size: int) -> str | None:
    """The top-level box (ISO BMFF: MP4, MOV) the file ends inside of, if any."""
    position = 0
    for _ in range(1_000_000):  # fragmented files have a pair of boxes per fragment
        file.seek(position)
        header = file.read(16)
        if len(header) < 8:
            return None
        length, kind = struct.unpack(">I4s", header[:8])
        if length == 1 and len(header) == 16:
            length = struct.unpack(">Q", header[8:])[0]
        elif length == 0:
            return None  # the last box runs to the end of the file, whatever its length
        if length < 8 or not re.fullmatch(rb"[A-Za-z0-9 ]{4}", kind):
            return None  # not a box: bytes after the last one are not this check's business
        if position + length > size:
            name = kind.decode()
            what = f"its {_BOX_NAMES[kind]} ('{name}' box)" if kind in _BOX_NAMES \
                else f"its '{name}' box"
            return (f"the file is cut short inside {what}: {size - position} of its {length} bytes "
                    "are "
                    f"there (truncated)")
        position += length
    return None


def _ebml_number(data: bytes, position: int) -> tuple[int, int, bool] | None:
    """An EBML variable-length number at ``position``: (value without its length marker, bytes
    it takes, whether it is all ones: an unknown size), or None where the data is not one."""
    if position >= len(data) or not data[position]:
        return None
    length = 9 - data[position].bit_length()
    if position + length > len(data):
        return None
    value = int.from_bytes(data[position:position + length], "big") & ((1 << (7 * length)) - 1)
    return value, length, value == (1 << (7 * length)) - 1


def _matroska_truncation(file, size: int) -> str | None:
    """A Matroska segment that declares more bytes than the file holds, if so."""
    head = file.read(4096)
    if head[:4] != b"\x1a\x45\xdf\xa3":
        return None
    header = _ebml_number(head, 4)
    if header is None:
        return None
    position = 4 + header[1] + header[0]  # the segment comes after the EBML header
    if head[position:position + 4] != b"\x18\x53\x80\x67":
        return None
    segment = _ebml_number(head, position + 4)
    if segment is None or segment[2]:
        return None  # an unknown size (a live recording): nothing to compare with
    start = position + 4 + segment[1]
    if start + segment[0] <= size:
        return None
    return (f"the file is cut short: {size - start} of the {segment[0]} bytes its Matroska segment "
            f"declares are there (truncated)")


_TS_SIZES = ((188, 0), (192, 4), (204, 0))
"""MPEG-TS packet sizes, with the bytes before each packet's sync byte (M2TS: a 4-byte time)."""


def _ts_layout(file) -> tuple[int, int, int] | None:
    """(packet size, bytes before each sync byte, offset of the first packet) of an MPEG-TS
    file: sync bytes at one stride over its first five packets. None: no such stride."""
    file.seek(0)
    head = file.read(6 * 204)
    for packet, prefix in _TS_SIZES:
        for sync in range(prefix, packet + prefix):
            places = range(sync, len(head), packet)[:5]
            if len(places) >= 2 and all(head[place] == 0x47 for place in places):
                return packet, prefix, sync - prefix
    return None


def _ts_truncation(file, size: int) -> str | None:
    """An MPEG-TS file that ends inside a transport packet: a cut, not trailing bytes, where
    the last whole packet is followed by a sync byte where the next packet's belongs."""
    layout = _ts_layout(file)
    if layout is None:
        return None
    packet, prefix, first = layout
    partial = (size - first) % packet
    if not partial:
        return None
    file.seek(size - partial + prefix)
    if partial > prefix and file.read(1) != b"\x47":
        return None  # trailing bytes that are not a packet's start
    return (f"the file is cut short: its last {packet}-byte transport packet has {partial} bytes "
            "(truncated)")


class TransportDamage(NamedTuple):
    """What :func:`ts_damage` finds: one phrase per kind for the damage report, and the PIDs of
    the streams begun after the opening (both empty: nothing found)."""

    found: list[str]
    added: list[int]


def ts_damage(path: str, known: Collection[int] = ()) -> TransportDamage:
    """Damage the packet headers of an MPEG-TS (or M2TS) file at ``path`` show, read again
    from start to end in chunks, vectorized (nothing found: not a transport stream, or a read
    error). The kinds: packets without their sync byte, packets a receiver marked as damaged
    (transport error indicator), packets missing from a stream (its continuity counter skips;
    the demuxer logs these only at debug level, and a lost audio PES leaves no other trace),
    and streams begun after the opening: PIDs carrying PES packets that are not among
    ``known`` (the PIDs of the streams the demuxer found on opening), such as a program that
    starts mid-file, whose packets are never read. A cut last packet is :func:`truncation`'s
    to report."""
    try:
        with open(path, "rb") as file:
            layout = _ts_layout(file)
            if layout is None:
                return TransportDamage([], [])
            no_sync, flagged, skips, pes = _ts_header_counts(file, *layout)
    except OSError:
        return TransportDamage([], [])
    found = []
    if no_sync:
        found.append(f"{no_sync} transport packet(s) had no sync byte (garbage)")
    if flagged:
        found.append(f"{flagged} transport packet(s) were marked damaged in transmission")
    if skips:
        found.append(f"transport packets were missing, or pieces joined, at {skips} place(s) "
                     f"(continuity errors)")
    # A PID flipped by damage starts a PES by chance at most once: a stream starts many.
    known = set(known)
    added = sorted(pid for pid, starts in pes.items() if starts > 1 and pid not in known)
    if known and added:
        found.append(f"{len(added)} stream(s) began after the input was opened (PID "
                     f"{', '.join(f'0x{pid:04x}' for pid in added)}: a new program, or recordings "
                     f"joined) and were not read")
    return TransportDamage(found, added if known else [])


def _ts_header_counts(file, packet: int, prefix: int,
                      first: int) -> tuple[int, int, int, dict[int, int]]:
    """(packets without their sync byte, packets marked damaged, continuity counter skips, PES
    packets begun per PID) over an MPEG-TS file's whole packets, of ``packet`` bytes with
    ``prefix`` bytes before each sync byte, from offset ``first`` on."""
    file.seek(first)
    last = np.full(8192, -1, np.int16)  # each PID's last continuity counter
    no_sync = flagged = skips = 0
    pes = np.zeros(8192, np.int64)
    while chunk := file.read(packet * 32768):
        count = len(chunk) // packet  # a cut last packet is _ts_truncation's to report
        whole = np.frombuffer(chunk, np.uint8, count * packet).reshape(count, packet)
        packets = whole[:, prefix:prefix + 188]
        synced = packets[:, 0] == 0x47
        no_sync += count - int(synced.sum())
        packets = packets[synced]
        heads = packets[:, :6].astype(np.int16)
        error = (heads[:, 1] & 0x80) != 0
        flagged += int(error.sum())
        pid = (heads[:, 1] & 0x1F) << 8 | heads[:, 2]
        control = heads[:, 3] >> 4 & 3
        pes += np.bincount(pid[_pes_starts(packets, heads, control) & ~error], minlength=8192)
        counter = heads[:, 3] & 0xF
        # A discontinuity indicator (adaptation field flag) allows a jump.
        jump = (control & 2 != 0) & (heads[:, 4] > 0) & (heads[:, 5] & 0x80 != 0)
        # Only packets with a payload advance the counter; null packets have none to keep.
        keep = (control & 1 != 0) & (pid != 0x1FFF) & ~error
        order = np.argsort(pid[keep], kind="stable")
        pid, counter, jump = pid[keep][order], counter[keep][order], jump[keep][order]
        previous = np.concatenate(([-1], counter[:-1]))
        starts = np.concatenate(([True], pid[1:] != pid[:-1]))
        previous[starts] = last[pid[starts]]
        step = (counter - previous) & 0xF
        # 0: a packet sent twice, which the standard allows.
        skips += int(((previous >= 0) & (step > 1) & ~jump).sum())
        ends = np.concatenate((starts[1:], [True]))
        last[pid[ends]] = counter[ends]
    return no_sync, flagged, skips, {int(p): int(pes[p]) for p in np.flatnonzero(pes)}


def _pes_starts(packets: np.ndarray, heads: np.ndarray, control: np.ndarray) -> np.ndarray:
    """Which of the (N, 188) uint8 transport ``packets`` (``heads``: their first 6 bytes as
    int16, ``control``: their adaptation field control) begin a PES packet: a payload that
    starts a unit with the 00 00 01 start code (tables start with a pointer and a table id)."""
    offset = 4 + np.where(control & 2 != 0, heads[:, 4] + 1, 0)
    begins = ((heads[:, 1] & 0x40) != 0) & (control & 1 != 0) & (offset <= 185)
    rows, at = np.arange(len(packets)), np.minimum(offset, 185)
    code = packets[rows, at], packets[rows, at + 1], packets[rows, at + 2]
    return begins & (code[0] == 0) & (code[1] == 0) & (code[2] == 1)


def copied_damage(damaged: int, refused: int = 0) -> list[str]:
    """The damage report's phrases about an input's copied audio/subtitle packets: ``damaged``
    ones (flagged, or failing to decode) copied as they are, ``refused`` ones the muxer refused."""
    found = [f"{damaged} damaged audio/subtitle packet(s) were copied as they "
             "are"] if damaged else []
    return found + ([f"{refused} audio/subtitle packet(s) could not be copied"] if refused else [])


def reported_damage(count: int) -> list[str]:
    """The damage report's phrase about ``count`` FFmpeg log lines about damage (see
    ffmpeglog.DamageLog)."""
    return [f"FFmpeg reported damage {count} time(s) while reading"] if count else []


BEFORE_KEYFRAME = 1000
"""Packets watched at most before a stream's first keyframe (see :meth:`InputDamage.read`)."""


class InputDamage:
    """What reading one input found wrong: counted by its reader as it goes, said in phrases
    by :meth:`report`.

    Args:
        path: the input; a local file is judged at once by its container's structure (see
            :func:`truncation`) and, once it has ended, an MPEG-TS file by its packet headers.
        format_name: FFmpeg's name of its container (e.g. "mpegts", "mov,mp4,m4a,3gp,3g2,mj2").

    Attributes:
        truncated: how the file is cut short, or None.
        decode_errors: video packets that could not be decoded (skipped), the read at which the
            container became unreadable included.
        unreadable_after: frames delivered when the container became unreadable (None: it did not).
        concealed: packets or frames FFmpeg flagged as damaged (concealed, still used).
        known_streams: the ids of the input's streams on opening (an MPEG-TS stream's: its PID).
        streams_added: reading found streams added after the opening (never read; see
            streamconv.io.ffmpeg.demux).
        declared_end: where the video's header says it ends, in seconds from 0 (see
            :func:`declared_end`), or None.
        last_end: where the last frame delivered ends, in seconds from 0, or None.
    """

    def __init__(self, path: str, format_name: str) -> None:
        self.path = path
        self._format_names = set(format_name.split(","))
        self.truncated = truncation(path, format_name)
        self.decode_errors = 0
        self.unreadable_after: int | None = None
        self.concealed = 0
        self.known_streams: set[int] = set()
        self.streams_added = False
        self.declared_end: float | None = None
        self.last_end: float | None = None
        self._transport: TransportDamage | None = None  # found once the input has ended
        # The pts of the packets read before the first keyframe that no frame has come of yet
        # (None: no longer watched).
        self._before_keyframe: set[int] | None = set()

    def read(self, packet) -> None:
        """Count a video packet (PyAV) about to be decoded: flagged damaged by the demuxer
        (concealed: it is still decoded), or read before the stream's first keyframe.

        A video whose first keyframe is lost (an AVI chunk whose header is unreadable, a
        recording begun mid-GOP) loses the frames up to the next one, and FFmpeg's decoders drop
        them without a word: the packets before the first keyframe are watched for their frames
        (up to BEFORE_KEYFRAME of them: a stream whose keyframes are not marked decodes them)."""
        self.concealed += packet.is_corrupt
        waiting = self._before_keyframe
        if waiting is None or not packet.size:
            return
        if packet.is_keyframe:
            self._before_keyframe = waiting or None
        elif packet.pts is None or len(waiting) >= BEFORE_KEYFRAME:
            self._before_keyframe = None  # nothing to match frames by, or no keyframes marked
        else:
            waiting.add(packet.pts)

    def decoded(self, frames: list) -> None:
        """Count video frames (PyAV) delivered: flagged as concealed damage, or of a packet
        read before the first keyframe."""
        self.concealed += sum(frame.is_corrupt for frame in frames)
        if self._before_keyframe:
            self._before_keyframe.difference_update(frame.pts for frame in frames)

    def forget_decoding(self) -> None:
        """Forget what decoding found so far: the packets skipped, the damage concealed and the
        packets before the first keyframe (a cut begins later; a seek lands on any packet)."""
        self.decode_errors = self.concealed = 0
        self._before_keyframe = None

    def report(self, *, ended: bool, frame_rate: float, reported: int, copied_damaged: int,
               streams: list[str]) -> list[str]:
        """One phrase per kind of damage found so far (empty: nothing); see FileSource.damage.

        Args:
            ended: whether the input has been read to its end (some damage shows only then).
            frame_rate: the video's frames per second (a video ending this close to its declared
                end is not short).
            reported: FFmpeg's log lines about damage in this input (see ffmpeglog.DamageLog).
            copied_damaged: damaged audio/subtitle packets copied as they are.
            streams: the phrases about the audio/subtitle streams (see streamcopy.CopiedStreams).
        """
        found = [self.truncated] if self.truncated else []
        unreadable = self.unreadable_after
        errors = self.decode_errors - (unreadable is not None)
        if errors:
            found.append(f"{errors} video packet(s) could not be decoded and were skipped")
        if unreadable is not None:
            found.append(f"the file could not be read past frame {unreadable} (unreadable data)")
        if self.concealed:
            found.append(f"{self.concealed} damaged packet(s) or frame(s) were concealed by the "
                         "decoder")
        if ended and self._before_keyframe:
            found.append(f"the video does not begin with a keyframe: {len(self._before_keyframe)} "
                         f"packet(s) before its first keyframe gave no frame (lost)")
        found += copied_damage(copied_damaged)
        transport = self._transport_damage() if ended else TransportDamage([], [])
        found += transport.found
        # PyAV's sign, where the TS check has no more
        if self.streams_added and not transport.added:
            found.append("streams began after the input was opened (a new program, or damage) and "
                         "were not read")
        found += reported_damage(reported)
        found += streams
        declared, lasted = self.declared_end, self.last_end
        # Both are times from 0, not durations: a video that starts late is not short.
        if ended and declared is not None and lasted is not None and \
                declared - lasted > max(0.1, 2 / float(frame_rate)):
            found.append(f"the video ends at {lasted:.2f} s, before the {declared:.2f} s its "
                         "header "
                         f"declares (the rest is lost)")
        return found

    def _transport_damage(self) -> TransportDamage:
        """What an MPEG-TS file's packet headers show wrong (see :func:`ts_damage`): found once,
        after the last frame, by reading the local file again; nothing for other inputs."""
        if self._transport is None:
            local = "://" not in self.path and Path(self.path).is_file()
            mpegts = local and "mpegts" in self._format_names
            self._transport = (ts_damage(self.path, self.known_streams) if mpegts
                               else TransportDamage([], []))
        return self._transport
