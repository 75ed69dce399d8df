"""The last frames of a damaged stream that libavcodec's frame threads lose, decoded again.

A frame-threaded decoder holds a frame or two in each of its threads. When a packet fails as
it drains at the end of the stream (a cut file's last packet, damage near the end), its error
comes out ahead of the frames still held; PyAV's ``decode()`` stops at the error, and a
draining decoder takes no further call, so those frames are never returned: FFmpeg decoding on
one thread gives them (2 or 3 of a damaged file's last frames). Decoding on one thread
throughout would keep them at the cost of the threads' speed for every file; instead
:class:`DecoderTail` keeps the packets of the last few GOPs and, where the stream ended with
fewer frames than packets, decodes them again on one thread and hands out the frames the
threads did not. The decoder that decodes them again must be set up as the stream's was (a
damaged stream's output depends on the reordering depth its opening found): the caller gives
it, the stream's own from the input opened again where it can be.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager

import av
from av.codec.codec import Capabilities
from av.codec.context import ThreadType

KEPT_PACKETS = 48
"""Packets kept at least (from a keyframe on): more than a frame-threaded decoder can hold, its
threads (FFmpeg makes at most 16 by itself) and its reordering delay (at most 16 frames)."""

KEPT_BYTES = 256 * 2**20
"""At most this much packet data is kept; a longer GOP leaves nothing to decode again from."""


class DecoderTail:
    """The packets a frame-threaded video decoder may still owe frames for, and the frames it
    delivered, to decode its last packets again on one thread at the end (see the module).

    Args:
        context: the stream's decoder (a PyAV VideoCodecContext); nothing is kept unless it
            decodes with frame threads.
        threaded: False where that cannot be (a hardware decoder asked for): nothing is kept.

    Attributes:
        sent, delivered: the packets (with data) given to the decoder, the frames it gave.
    """

    def __init__(self, context, *, threaded: bool = True) -> None:
        capable = bool(context.codec.capabilities & Capabilities.frame_threads)
        self._threaded = threaded and capable and context.thread_count != 1 and \
            bool(context.thread_type & ThreadType.FRAME)
        # Each kept GOP with the frames delivered before its keyframe was sent.
        self._gops: deque[tuple[int, list[av.Packet]]] = deque()
        self._kept = self._bytes = 0
        self._recent: list = []  # the pts of the frames delivered from frame _recent_from on
        self._recent_from = 0
        self.sent = self.delivered = 0

    def keep(self, packet: av.Packet) -> None:
        """Note a packet about to be sent to the decoder (an empty one is not kept)."""
        if not packet.size:
            return
        self.sent += 1
        if not self._threaded:
            return
        if packet.is_keyframe or not self._gops:
            self._gops.append((self.delivered, []))
        self._gops[-1][1].append(packet)
        self._kept += 1
        self._bytes += packet.size
        while len(self._gops) > 1 and (self._kept - len(self._gops[0][1]) >= KEPT_PACKETS or
                                       self._bytes > KEPT_BYTES):
            self._drop_first()
        if self._bytes > KEPT_BYTES:  # one GOP alone is too long: nothing to start again from
            self._gops.clear()
            self._kept = self._bytes = 0
            self._recent, self._recent_from = [], self.delivered

    def _drop_first(self) -> None:
        """Keep the first GOP no longer, nor the frames delivered before the next one began
        (but for a few: frames of earlier packets still come out after a keyframe is sent)."""
        _, dropped = self._gops.popleft()
        self._kept -= len(dropped)
        self._bytes -= sum(p.size for p in dropped)
        keep_from = max(self._recent_from, self._gops[0][0] - KEPT_PACKETS)
        del self._recent[:keep_from - self._recent_from]
        self._recent_from = keep_from

    def passed(self, frames: list) -> list:
        """Note the frames the decoder delivered; returns them."""
        self.delivered += len(frames)
        if self._gops:
            self._recent.extend(frame.pts for frame in frames)
        else:  # nothing kept (yet, or any longer): no frame to match
            self._recent_from = self.delivered
        return frames

    def lost(self, decoder: Callable[[], AbstractContextManager],
             quiet: Callable[[], AbstractContextManager] = contextlib.nullcontext) -> list:
        """At the end of the stream (the decoder drained): the frames that decoding the kept
        packets again on one thread gives after those the threads delivered (empty: every
        packet gave its frame, or the two do not match).

        The frames decoded again come in the order the threads delivered theirs, the lost ones
        last: those delivered must be a prefix of them, pts for pts (damaged pts, None and
        repeated ones included), where they begin at the first kept packet's frame.

        Args:
            decoder: makes the decoder to decode them again with: a context giving a new
                decoder of the stream on one thread, parameters as the stream's (see
                :func:`fresh_decoder`).
            quiet: a context the decoding again runs in (its FFmpeg lines repeat ones already
                heard).
        """
        owed = self.sent - self.delivered
        if not self._threaded or not self._gops or owed <= 0:
            return []
        with quiet(), decoder() as context:
            again = _decoded(context, [packet for _, gop in self._gops for packet in gop])
        stamps, delivered = [frame.pts for frame in again], self._recent
        for shared in range(min(len(again), len(delivered)), max(0, len(again) - owed) - 1, -1):
            if delivered[len(delivered) - shared:] == stamps[:shared]:
                lost = again[shared:]
                if not shared and _repeats(lost, delivered):
                    return []  # nothing matched: the one thread decoded damage otherwise
                self.delivered += len(lost)
                return lost
        return []


def _repeats(frames: list, delivered: list) -> bool:
    """Whether a frame of ``frames`` has the pts of a frame delivered (None pts aside): where
    not one frame of the threads' matched those decoded again, handing all of these out would
    write frames twice."""
    seen = {pts for pts in delivered if pts is not None}
    return any(frame.pts is not None and frame.pts in seen for frame in frames)


def fresh_decoder(context):
    """A new decoder (PyAV) of ``context``'s codec and extradata, size and pixel format on one
    thread: where the stream cannot be opened again to give it all of its parameters (a pipe,
    a URL), the nearest. Unopened: it opens at its first packet."""
    fresh = av.CodecContext.create(context.codec.name, "r")
    fresh.extradata = context.extradata
    fresh.width, fresh.height = context.width, context.height
    if context.pix_fmt:
        fresh.pix_fmt = context.pix_fmt
    fresh.thread_type, fresh.thread_count = "NONE", 1
    return fresh


def _decoded(context, packets: list[av.Packet]) -> list:
    """``packets``' frames from ``context`` (a decoder that has not run), drained at the end;
    packets that fail are skipped, as FFmpeg skips them."""
    frames: list = []
    for packet in [*packets, None]:
        try:
            frames += context.decode(packet)
        except (av.EOFError, av.InvalidDataError, av.ExternalError):
            continue
        except av.FFmpegError:
            break  # the decoder cannot go on: what it gave is all there is
    return frames
