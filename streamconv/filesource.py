"""The file source: a video file or stream (any input FFmpeg reads) decoded by PyAV.

The first frame is decoded on opening, so the source knows its true size and an input with
nothing decodable is refused before any output exists. Damage is counted, not fatal (see
``FileSource.damage``); a network input that stalls past its timeout ends the run.

A local file is also checked against its container's own structure (an MP4 box, a Matroska
segment, an MPEG-TS packet that the file ends inside of), because a cut file often decodes
without a single error: the frames after the cut are simply not there (see streamconv.damage).
"""

from __future__ import annotations

import errno
import logging
import struct
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import cv2  # noqa: F401  (before av: see streamconv.display.check_import_order)
import av
import numpy as np

from .colour import FULL_RANGE, ColourTags, format_bits, frame_to_rgb, plane_rows
from .damage import declared_end, missing_parameters, truncation, ts_damage
from .errors import FrameFormatError, FrameTypeError, InputError, NoVideoStreamError, StreamError
from .ffmpeglog import DamageLog, ffmpeg_reason
from .frames import DEFAULT_MAX_PIXELS, check_frame_size
from .slots import RESIZED, FrameMeta
from .sources import Source
from .yuv import PLANE_FORMATS, SEMI_PLANAR_FORMATS, YuvLayout, split_semi_planar

log = logging.getLogger(__name__)


NETWORK_TIMEOUT = 10.0
"""Seconds a network input may send nothing before the run gives up (``--timeout``)."""


class FileSource(Source):
    """Decodes a video file or stream with PyAV into RGB frames.

    Args:
        path: anything FFmpeg opens (a file path or URL).
        video_stream: index among the input's video streams (0 = the first).
        threads: decoder threading ("AUTO", "FRAME", "SLICE" or "NONE").
        copy_streams: pass the input's audio and subtitle packets along with the frames
            (``FrameMeta.packets``), for a file output to copy them unchanged.
        max_pixels: refuse frames larger than this (None: no limit): the declared size
            before anything is decoded, then the first frame's.
        timeout: seconds to wait for data from a network input (a URL) before giving up
            (None: NETWORK_TIMEOUT for URLs, no limit for files; 0: no limit).
        depth: bits per sample of the frames delivered: 16 (uint16, 0..65535), 8 (uint8), or
            None: 16 for video of more than 8 bits per sample (10-bit and up), else 8.
        hwaccel: decode on this kind of hardware decoder (e.g. ``"cuda"``: NVDEC), one of
            :func:`hardware_decoders`; None decodes in software. Frames come back to host
            memory (nv12, or p010le for 10-bit) and travel as planes like software-decoded
            ones. A codec the hardware cannot decode falls back to software, with a notice.

    Frames are (H, W, 3) RGB in host memory, uint8 or uint16 (``dtype``, see ``depth``;
    ``bits`` is the input's own bits per sample), or for yuv420p video, on request, the
    decoder's planes unconverted (``planes``, see :meth:`read_into`); each carries the
    decoder's pts and the stream's time base. Packets that fail to decode are skipped and counted in
    ``decode_errors``; copied audio is decoded too, only to check it (``copied_damaged``); an
    audio stream whose parameters are missing is not copied; ``damage()`` says all that was
    found wrong. The first frame is decoded on opening: its size is the source's; a later
    frame of another size makes ``read_into`` return ``RESIZED`` first. Frames are delivered as
    stored; a rotation or mirroring for display is in ``display_matrix``, for a file sink to keep.
    """

    name = "file"

    def __init__(self, path: str | Path, *, video_stream: int = 0, threads: str = "AUTO",
                 copy_streams: bool = True, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                 timeout: float | None = None, depth: int | None = None, hwaccel: str | None = None) -> None:
        if depth not in (None, 8, 16):
            raise InputError(f"depth must be 8 or 16 bits per sample (or None: from the input), got {depth!r}")
        self.path = str(path)
        self.decode_errors = 0
        self.concealed = 0
        self.copied_damaged = 0  # copied packets flagged by the demuxer or failing to decode: copied as they are
        self._unreadable_after: int | None = None  # frames delivered when the container stopped reading
        self._stream_packets: dict[int, int] = {}  # packets demuxed per audio/subtitle stream index
        self._unchecked: set[int] = set()  # copied audio streams FFmpeg has no decoder for
        self._ended = False
        self._container = None
        if "://" not in self.path:
            file = Path(self.path)
            if not file.exists():
                raise InputError(f"input not found: {self.path}")
            if file.is_dir():
                raise InputError(f"input is a directory, not a video: {self.path}")
        if timeout is None:
            timeout = NETWORK_TIMEOUT if "://" in self.path else 0
        self.timeout = timeout or None
        options = {}
        if self.timeout:
            # rw_timeout ends a stalled read with the data so far; PyAV's own timeout also covers
            # the opening probe, which rw_timeout does not bound on every protocol.
            options["rw_timeout"] = str(int(self.timeout * 1e6))
        self.hwaccel = hwaccel
        try:
            self._container = self._open(options, hwaccel)
        except InputError:
            raise
        except PermissionError:
            raise InputError(f"input not readable (permission denied): {self.path}") from None
        except (av.FFmpegError, OSError, ValueError) as exc:
            raise InputError(f"cannot open input {self.path}: {self._reason(exc)}") from None
        # Before the streams are judged: a cut index can hide the video stream itself.
        self._format_names = set(self._container.format.name.split(","))
        self._truncated = truncation(self.path, self._container.format.name)
        self._transport: list[str] | None = None  # found once the source has ended
        videos = self._container.streams.video
        if not videos:
            self.close()
            if self._truncated:
                raise InputError(f"no video stream could be read from {self.path}: {self._truncated}")
            raise NoVideoStreamError(f"no video stream in input: {self.path}")
        if not 0 <= video_stream < len(videos):
            count = len(videos)
            self.close()
            raise InputError(f"video stream {video_stream} requested, input has {count}: {self.path}")
        self._stream = videos[video_stream]
        self._stream.thread_type = threads
        context = self._stream.codec_context
        try:
            check_frame_size(int(context.width), int(context.height), max_pixels, self.path)
            self.other_streams = [s for s in self._container.streams if s is not self._stream]
            wanted = [s for s in self.other_streams if copy_streams and s.type in ("audio", "subtitle")]
            missing = {s.index: missing_parameters(s) for s in wanted if s.codec_context is not None}
            self._undescribed: list[str] = []  # streams left out of a cut file for want of a codec
            self.copied_streams = [s for s in wanted if s.index in missing and not missing[s.index]]
            self._copied_indices = {s.index for s in self.copied_streams}
            self._report_left_out(wanted, missing)
            # Streams left out for want of parameters are still read, to tell "no packets at all"
            # from "packets that say too little" in damage(); kept as numbers for after close().
            self._counted_streams = [s for s in wanted if s.index in missing]
            self._counted = [(s.index, s.type, missing[s.index]) for s in self._counted_streams]
            self._packets: list = []  # copied-stream packets read since the last frame
            components = {self._container.format.name, *self._container.format.name.split(","),
                          self._stream.codec_context.name, *(s.codec_context.name for s in self._counted_streams)}
            self._damage_log = DamageLog(components).start()
            self._frames = self._decode()
            # The first frame, not the header, gives the size: headers can be missing or name
            # a later size, and a file with nothing decodable is refused before any output exists.
            self._held: av.VideoFrame | None = self._first_frame()
            self.width, self.height = self._held.width, self._held.height
            check_frame_size(self.width, self.height, max_pixels, self.path)
        except BaseException:
            self.close()
            raise
        rate = self._stream.average_rate or self._stream.guessed_rate or Fraction(30)
        self.frame_rate = Fraction(rate)
        self.time_base = Fraction(self._stream.time_base or Fraction(1, 1000))
        self.frame_count = _frame_count(self._stream, self.frame_rate)
        # Kept as a number: damage() is asked after close(), when the stream is gone.
        self._declared_end = declared_end(self._stream, self._container.format.name)
        self._last_end: float | None = None  # seconds: where the last frame delivered ends
        self.colour = ColourTags.of(context)
        if self._held.format.name.startswith("yuvj"):
            self.colour = replace(self.colour, range=FULL_RANGE)  # yuvj formats are full range untagged
        self.display_matrix = _display_matrix(self._held)
        pixel_format = self._held.format
        self.bits = format_bits(pixel_format)
        if depth is None:
            depth = 16 if self.bits > 8 else 8
        self.dtype = np.dtype(np.uint16 if depth == 16 else np.uint8)
        self._rgb_format = "rgb48le" if depth == 16 else "rgb24"
        self.planes = self._layout(pixel_format.name)
        self._report_decoder()
        if self.bits > 8:
            if depth == 8:
                log.warning("%s is %d-bit %s: frames are filtered and written with 8 bits per channel "
                            "(depth 8 asked for)", self.path, self.bits, pixel_format.name)
            else:
                log.info("%s is %d-bit %s: frames are filtered in 16 bits", self.path, self.bits,
                         pixel_format.name)
        self._index = 0

    def _open(self, options: dict, hwaccel: str | None):
        """The input container, its video decoder on ``hwaccel`` hardware when asked."""
        timeout = (self.timeout, 2 * self.timeout) if self.timeout else None
        if hwaccel is None:
            return av.open(self.path, mode="r", options=options, timeout=timeout)
        if hwaccel not in hardware_decoders():
            raise InputError(f"hardware decoder {hwaccel!r} is not in this FFmpeg build; it has: "
                             f"{', '.join(hardware_decoders()) or 'none'}")
        from av.codec.hwaccel import HWAccel

        try:
            return av.open(self.path, mode="r", options=options, timeout=timeout,
                           hwaccel=HWAccel(device_type=hwaccel, allow_software_fallback=True))
        except (av.FFmpegError, OSError, ValueError) as exc:
            # The same open without the hardware tells a broken input from a missing device.
            av.open(self.path, mode="r", options=options, timeout=timeout).close()
            raise InputError(f"hardware decoding ({hwaccel}) could not start for {self.path}: "
                             f"{self._reason(exc)} (no such device here?); leave out --hwaccel to "
                             f"decode in software") from None

    @property
    def hardware_decoding(self) -> bool:
        """Whether the hardware decoder asked for (``hwaccel``) is the one decoding."""
        return self.hwaccel is not None and bool(self._stream.codec_context.is_hwaccel)

    def _report_decoder(self) -> None:
        """Log whether the hardware decoder asked for is the one decoding."""
        if self.hwaccel is None:
            return
        context = self._stream.codec_context
        if self.hardware_decoding:
            log.info("%s: decoding %s on %s (frames come back as %s)", self.path, context.name, self.hwaccel,
                     self._held.format.name)
        else:
            log.warning("%s: %s cannot decode %s here; decoding in software", self.path, self.hwaccel,
                        context.name)

    def _report_left_out(self, wanted: list, missing: dict[int, str | None]) -> None:
        """Warn of the audio/subtitle streams that are not copied: a codec FFmpeg does not know
        (not damage), or parameters that could not be found (see damage.missing_parameters)."""
        for stream in wanted:
            if stream.index not in missing and self._truncated:  # its description was cut off
                log.warning("%s: %s stream %d has no codec parameters (the file is cut short); not copied",
                            self.path, stream.type, stream.index)
                self._undescribed.append(f"{stream.type} stream {stream.index} was left out: its description "
                                         f"is cut off")
            elif stream.index not in missing:
                log.warning("%s: %s stream %d is of a codec FFmpeg does not know; not copied", self.path,
                            stream.type, stream.index)
            elif missing[stream.index]:
                log.warning("%s: %s stream %d (%s) has no %s (its packets are damaged or missing); "
                            "not copied", self.path, stream.type, stream.index,
                            stream.codec_context.name, missing[stream.index])

    def _layout(self, pixel_format: str) -> YuvLayout | None:
        """The planes layout frames of ``pixel_format`` can be read in: yuv420p for 8-bit frames
        (from yuv420p or nv12), yuv420p10le or yuv420p12le for 16-bit ones (from those, or
        p010le); None for other formats, sizes or depths."""
        layout = YuvLayout.of_stream(self.width, self.height, pixel_format, self.colour)
        return layout if layout is not None and layout.frame_dtype == self.dtype else None

    def _first_frame(self) -> av.VideoFrame:
        """Decode up to the first frame (kept for the first read).

        Raises:
            InputError: the stream ends, or fails, before any frame decodes.
        """
        try:
            frame = next(self._frames, None)
        except StreamError as exc:
            raise InputError(str(exc)) from None
        if frame is None:
            damage = [f"{self.decode_errors} damaged packet(s)"] if self.decode_errors else []
            damage += [self._truncated] if self._truncated else []
            details = f" ({'; '.join(damage)})" if damage else ""
            raise InputError(f"no frame could be decoded from {self.path}{details}")
        return frame

    def _decode(self) -> Iterator[av.VideoFrame]:
        """Demux and decode packet by packet, so one bad packet does not end the stream.

        Packets of the copied streams are kept for the next frame's metadata (see _keep).
        """
        packets = self._container.demux([self._stream, *self._counted_streams])
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.InvalidDataError:
                self.decode_errors += 1  # the container is unreadable from here on: end the video
                self._unreadable_after = self._index
                yield from self._flush()
                return
            except (av.FFmpegError, OSError) as exc:
                yield from self._flush()  # the frames the decoder still holds come first
                raise StreamError(f"reading {self.path} failed after {self._index} frames: "
                                  f"{self._reason(exc)}") from None
            if packet.stream is not self._stream:
                if packet.size:  # demuxing ends each stream with an empty flush packet
                    self._keep(packet)
                continue
            self.concealed += packet.is_corrupt  # the demuxer saw damage; the packet is still used
            try:
                frames = packet.decode()
            except av.InvalidDataError:
                self.decode_errors += 1
                continue
            except av.FFmpegError as exc:
                raise StreamError(f"decoding {self.path} failed: {ffmpeg_reason(exc)}") from None
            for frame in frames:
                self.concealed += frame.is_corrupt  # decoded with errors hidden by concealment
                yield frame

    def _keep(self, packet) -> None:
        """Count a packet of an audio/subtitle stream and keep it for the output if its stream
        is copied. Copied audio is decoded, the samples dropped, so damage in it is seen, not
        only passed on (a muxer copies any bytes)."""
        stream = packet.stream
        self._stream_packets[stream.index] = self._stream_packets.get(stream.index, 0) + 1
        if stream.index not in self._copied_indices:
            return
        damaged = packet.is_corrupt
        if stream.type == "audio" and stream.index not in self._unchecked:
            try:
                packet.decode()
            except av.InvalidDataError:
                damaged = True
            except av.FFmpegError:
                self._unchecked.add(stream.index)  # no decoder for it here: copied unchecked
        self.copied_damaged += damaged
        self._packets.append(packet)

    def _flush(self) -> Iterator[av.VideoFrame]:
        """The frames a decoder still holds after its input stopped early (none if it cannot say)."""
        try:
            yield from self._stream.codec_context.decode(None)
        except (av.FFmpegError, OSError):
            return

    def _reason(self, exc: BaseException) -> str:
        """FFmpeg's reason, naming the timeout when the input stalled."""
        reason = ffmpeg_reason(exc)
        stalled = isinstance(exc, (av.ExitError, TimeoutError)) or getattr(exc, "errno", None) == errno.EIO
        if self.timeout and stalled:
            reason += f" (no data within the {self.timeout:g} s timeout)"
        return reason

    def damage(self) -> list[str]:
        """What was found wrong with the input so far, one phrase per kind (empty: nothing).

        A file that ends inside its container's structure (cut short: found on opening), video
        packets that failed to decode (skipped), packets or frames FFmpeg flagged as damaged
        (concealed, still used; copied as they are for audio and subtitles), FFmpeg's log lines
        about damage, streams left out for want of parameters; and, once the source has ended,
        the container becoming unreadable, copied audio streams that had no packets, and a video
        that ends before the time its header declares. Damage FFmpeg hides without flagging it
        cannot be seen here.
        """
        found = [self._truncated] if self._truncated else []
        unreadable = self._unreadable_after
        errors = self.decode_errors - (unreadable is not None)
        if errors:
            found.append(f"{errors} video packet(s) could not be decoded and were skipped")
        if unreadable is not None:
            found.append(f"the file could not be read past frame {unreadable} (unreadable data)")
        if self.concealed:
            found.append(f"{self.concealed} damaged packet(s) or frame(s) were concealed by the decoder")
        if self.copied_damaged:
            found.append(f"{self.copied_damaged} damaged audio/subtitle packet(s) were copied as they are")
        if self._ended:
            found += self._transport_damage()
        if self.reported:
            found.append(f"FFmpeg reported damage {self.reported} time(s) while reading")
        found += self._undescribed
        for index, kind, missing in self._counted:
            empty = self._ended and not self._stream_packets.get(index)
            if missing:
                found.append(f"{kind} stream {index} was left out: "
                             f"{'it had no packets' if empty else f'its {missing} could not be found'}")
            elif empty and kind == "audio":  # an empty subtitle track is common in intact files
                found.append(f"{kind} stream {index} had no packets")
        if self._ended:
            declared, lasted = self._declared_end, self._last_end
            # Both are times from 0, not durations: a video that starts late is not short.
            if declared is not None and lasted is not None and \
                    declared - lasted > max(0.1, 2 / float(self.frame_rate)):
                found.append(f"the video ends at {lasted:.2f} s, before the {declared:.2f} s its header "
                             f"declares (the rest is lost)")
        return found

    def _transport_damage(self) -> list[str]:
        """What an MPEG-TS file's packet headers show wrong (see damage.ts_damage): found once,
        after the last frame, by reading the local file again; nothing for other inputs."""
        if self._transport is None:
            local = "://" not in self.path and Path(self.path).is_file()
            self._transport = ts_damage(self.path) if local and "mpegts" in self._format_names else []
        return self._transport

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Decode the next frame into ``buffer``, host memory: converted to RGB for an (H, W, 3)
        buffer of ``dtype``, or copied plane by plane, unconverted, into a flat (1.5 W H,) buffer
        laid out as ``self.planes`` says (4:2:0 input of 8, 10 or 12 bits only; nv12 and p010le
        chroma is split apart on the way)."""
        frame, self._held = (self._held if self._held is not None else next(self._frames, None)), None
        if frame is None:
            self._ended = True
            return None
        if frame.width != self.width or frame.height != self.height:
            log.warning("%s: frame size changed at frame %d: %dx%d -> %dx%d", self.path, self._index,
                        self.width, self.height, frame.width, frame.height)
            self.width, self.height = frame.width, frame.height
            self.planes = self._layout(frame.format.name)
            self._held = frame
            return RESIZED
        if buffer.shape not in (self.shape, self.planes.shape if self.planes else None):
            raise FrameFormatError(f"buffer of shape {buffer.shape} for {self.width}x{self.height} frames")
        if buffer.ndim == 1:
            self._copy_planes(frame, buffer)
        else:
            if buffer.dtype != self.dtype:
                raise FrameTypeError(f"buffer of dtype {buffer.dtype} for {self.dtype} frames")
            plane = frame_to_rgb(frame, self._rgb_format).planes[0]
            rows = plane_rows(plane, self.dtype, self.height)
            np.copyto(buffer, rows[:, : self.width * 3].reshape(self.height, self.width, 3))
        pts = frame.pts
        if frame.time is not None:
            length = frame.duration * frame.time_base if frame.duration and frame.time_base else None
            self._last_end = frame.time + float(length or 1 / self.frame_rate)
        meta = FrameMeta(self._index, pts, self.time_base if pts is not None else None,
                         packets=self.take_packets(
                             until=frame.time + 1 / float(self.frame_rate) if frame.time is not None else None))
        self._index += 1
        return meta

    def _copy_planes(self, frame: av.VideoFrame, buffer: np.ndarray) -> None:
        """Copy a 4:2:0 frame's planes into a flat slot buffer (decoder rows may be padded)."""
        layout = self.planes
        if layout is None:
            raise StreamError(f"{self.path} is not 4:2:0 video of 8, 10 or 12 bits (yuv420p, nv12, "
                              f"yuv420p10le, yuv420p12le, p010le); its frames cannot be read as planes")
        name = frame.format.name
        bits, shift = SEMI_PLANAR_FORMATS.get(name, (None, 0))
        if bits == layout.bits:
            luma, chroma = frame.planes
            split_semi_planar(buffer, plane_rows(luma, layout.dtype, self.height),
                              plane_rows(chroma, layout.dtype, self.height // 2), layout, shift)
            return
        same = name in PLANE_FORMATS if layout.bits == 8 else name == layout.pix_fmt
        if not same:  # the decoder changed format mid-stream
            frame = frame.reformat(format=layout.pix_fmt)
        for plane, target in zip(frame.planes, layout.planes(buffer)):
            np.copyto(target, plane_rows(plane, layout.dtype, target.shape[0])[:, : target.shape[1]])

    def take_packets(self, until: float | None = None) -> list:
        """The copied-stream packets read and not yet handed on that start before ``until``
        seconds (None: all of them, as after the last frame).

        A decoder holds several packets before its first frame comes out (one per thread with
        frame threading), so the demuxer runs ahead of the frames: packets later than the
        frame wait for a later one, and a run stopped early copies nothing past its end.
        """
        if until is None:
            packets, self._packets = self._packets, []
            return packets
        due, waiting = [], []
        for packet in self._packets:
            stamp = packet.pts if packet.pts is not None else packet.dts
            late = stamp is not None and packet.time_base is not None and stamp * packet.time_base >= until
            (waiting if late else due).append(packet)
        self._packets = waiting
        return due

    def describe(self) -> str:
        codec = self._stream.codec_context.name
        count = f", {self.frame_count} frames" if self.frame_count else ""
        hardware = f" (decoded on {self.hwaccel})" if self.hardware_decoding else ""
        return f"{self.path}: {codec}{hardware} {self.width}x{self.height} @ {float(self.frame_rate):.3g} fps{count}"

    @property
    def reported(self) -> int:
        """FFmpeg log lines about damage in this input so far (see streamconv.ffmpeglog)."""
        log_ = getattr(self, "_damage_log", None)
        return log_.count if log_ is not None else 0

    def close(self) -> None:
        damage_log = getattr(self, "_damage_log", None)
        if damage_log is not None:
            damage_log.stop()
        if self._container is not None:
            self._container.close()
            self._container = None


def hardware_decoders() -> list[str]:
    """The hardware decoder kinds this FFmpeg build can open (e.g. ``["cuda", "vaapi"]``); a kind
    listed here still needs its device (a GPU) to be present."""
    from av.codec.hwaccel import hwdevices_available

    return list(hwdevices_available())


def _frame_count(stream, rate: Fraction) -> int | None:
    if stream.frames:
        return int(stream.frames)
    if stream.duration and stream.time_base:
        return max(1, round(float(stream.duration * stream.time_base * rate)))
    return None


def _display_matrix(frame: av.VideoFrame) -> tuple[int, ...] | None:
    """The 3x3 display matrix (9 ints, FFmpeg's fixed point) a frame carries, or None: how a
    player should rotate or mirror it. streamconv filters frames as stored and passes it on."""
    from av.sidedata.sidedata import Type

    data = frame.side_data.get(Type.DISPLAYMATRIX)
    if data is None or len(bytes(data)) < 36:
        return None
    matrix = struct.unpack("<9i", bytes(data)[:36])
    return None if matrix == (65536, 0, 0, 0, 65536, 0, 0, 0, 1 << 30) else matrix
