"""A file source's decoding: the video stream's packets demuxed and decoded one by one, the
copied streams' packets kept, damage counted, and every frame the decoder gives delivered.

One bad packet does not end the stream: it is skipped and counted. The decoder's last frames
come at the end, those its frame threads lose after a failing packet included
(streamconv.io.sources.decoder_tail). :class:`PacketDecoding` is a part of
streamconv.io.sources.file.FileSource, which holds the container, the stream and the damage count.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import av

from ...errors import StreamError
from ..ffmpeg.container import read_container
from ..ffmpeg.damage import InputDamage
from .decoder_tail import DecoderTail, fresh_decoder
from ..ffmpeg.demux import Demux
from ..ffmpeg.log import DamageLog, ffmpeg_reason, is_damaged_data
from ..ffmpeg.streamcopy import CopiedStreams


class PacketDecoding:
    """FileSource's packets-to-frames part (a mixin): uses its ``path``, ``timeout``,
    ``hwaccel``, ``_container``, ``_stream``, ``_copies``, ``_damage``, ``_damage_log``,
    ``_index``, ``_decoding`` (a lock held around decode calls) and
    ``_demuxer``, ``_options`` (how the input was opened: the demuxer, None where probed, and
    its FFmpeg options)."""

    path: str
    timeout: float | None
    hwaccel: str | None
    _container: Any
    _stream: Any
    _copies: CopiedStreams
    _damage: InputDamage
    _damage_log: DamageLog
    _index: int
    _decoding: threading.Lock
    _demuxer: str | None
    _options: dict[str, str]
    _read_error: str | None

    @property
    def hardware_decoding(self) -> bool:
        """Whether the hardware decoder asked for (``hwaccel``) is the one decoding."""
        return self.hwaccel is not None and bool(self._stream.codec_context.is_hwaccel)

    def _decode(self) -> Iterator[av.VideoFrame]:
        """Decode packet by packet, so one bad packet does not end the stream; then the frames
        the decoder still holds, and those its threads lost (see
        streamconv.io.sources.decoder_tail)."""
        context = self._stream.codec_context
        tail = DecoderTail(context, threaded=self.hwaccel is None)
        for packet in self._video_packets():
            tail.keep(packet)
            yield from tail.passed(self._decoded(context.decode, packet))
        yield from tail.passed(list(self._flush()))  # the frames the decoder still holds come first
        lost = tail.lost(self._decoder_again, self._damage_log.paused)
        self._damage.decoded(lost)
        yield from lost
        self._raise_read_error()

    @contextlib.contextmanager
    def _decoder_again(self):
        """A new decoder of the video stream on one thread, for DecoderTail: the stream's own in
        the input opened again where it is a local file, with every parameter the opening found
        (a damaged file's differ from any default), else one of the same codec (fresh_decoder)."""
        again = self._opened_again()
        try:
            if again is None or self._stream.index >= len(again.streams):
                yield fresh_decoder(self._stream.codec_context)
            else:
                stream = again.streams[self._stream.index]
                stream.thread_type = "NONE"
                yield stream.codec_context
        finally:
            if again is not None:
                again.close()

    def _opened_again(self):
        """The input opened again as it was first (its demuxer and options), or None where it
        cannot be (not a local file) or fails to."""
        if "://" in self.path or not os.path.isfile(self.path):
            return None
        try:
            return read_container(self.path, format=self._demuxer, options=self._options)
        except (av.FFmpegError, OSError, ValueError):
            return None

    def _decoded(self, decode, packet: av.Packet | None) -> list[av.VideoFrame]:
        """``decode(packet)``'s frames (libavcodec's); failures counted and skipped, concealment
        counted."""
        try:
            with self._decoding:
                frames = decode(packet)
        except av.EOFError:
            return []  # flushed already
        except av.FFmpegError as exc:
            if not is_damaged_data(exc, self.hardware_decoding):
                raise StreamError(f"decoding {self.path} failed: {ffmpeg_reason(exc)}") from None
            self._damage.decode_errors += 1
            return []
        self._damage.decoded(frames)
        return frames

    def _video_packets(self) -> Iterator[av.Packet]:
        """Demux the video packets to decode, counting those the demuxer flagged as damaged.

        Packets of the copied streams are kept for the next frame's metadata (see
        CopiedStreams.keep). A damaged video packet of data but no size is left out, as FFmpeg
        leaves it (libavcodec refuses it as an invalid argument). Unreadable data ends the video
        (counted), a chunk whose damaged header claims more memory than can be given included;
        a read failure ends it too, and :meth:`_raise_read_error` raises it once the decoder
        has given up the frames it holds. Streams that appear after the opening are not read
        (see streamconv.io.ffmpeg.demux): counted.
        """
        self._read_error = None
        packets = Demux(self._container, [self._stream, *self._copies.counted_streams])
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                self._damage.streams_added = packets.streams_added
                return
            except (av.InvalidDataError, av.MemoryError):
                # the container is unreadable from here on: end the video
                self._damage.decode_errors += 1
                self._damage.unreadable_after = self._index
                return
            except (av.FFmpegError, OSError) as exc:
                self._read_error = ffmpeg_reason(exc, self.timeout)
                return
            if packet.stream is not self._stream:
                if packet.size:  # demuxing ends each stream with an empty flush packet
                    self._copies.keep(packet)
                continue
            if not packet.size and packet.buffer_ptr:
                continue
            self._damage.read(packet)
            yield packet

    def _raise_read_error(self) -> None:
        """Raise the read failure that ended the demuxing, if one did, counting the frames
        delivered by now."""
        reason, self._read_error = getattr(self, "_read_error", None), None
        if reason is not None:
            raise StreamError(f"reading {self.path} failed after {self._index} frames: {reason}")

    def _flush(self) -> Iterator[av.VideoFrame]:
        """The frames a decoder still holds after its input stopped early (none if it cannot
        say)."""
        try:
            with self._decoding:
                frames = self._stream.codec_context.decode(None)
        except (av.FFmpegError, OSError):
            return
        yield from frames


    def _drain_decoder(self) -> None:
        """End the decoder's stream (frames still in flight are dropped) while the input is open.

        A libavcodec decoder freed with frames in flight on its worker threads can deadlock in
        avcodec_free_context (seen with PyAV 19 on Python 3.13, a few exits in a hundred, when
        the last reference went with an error's traceback at interpreter exit); drained, its
        threads are idle when it is freed."""
        stream = getattr(self, "_stream", None)
        if stream is None or getattr(self, "_container", None) is None or \
                not stream.codec_context.is_open:
            return  # (decode would open a decoder that never ran)
        if not self._decoding.acquire(timeout=1.0):
            return  # a reader still blocked in a decode call (an abort does not wait for it)
        try:
            with contextlib.suppress(av.FFmpegError):  # drained already
                stream.codec_context.decode(None)
        finally:
            self._decoding.release()
