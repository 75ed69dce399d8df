"""Joining the encoded segments of a segmented run into one output, without re-encoding.

The parts' video packets are remuxed in order into the output, and the input's audio and subtitle
packets are copied once from the input (the streams a one-piece run copies, see
:mod:`streamconv.io.ffmpeg.streamcopy`), so the output carries the input's frames, timestamps and
audio as a one-piece run gives them. Each part begins with a keyframe; the parts must share one
codec description (extradata: H.264's SPS/PPS in MP4 or Matroska), which the same encoder settings
give and which is checked before anything is written.
"""

from __future__ import annotations

import heapq
import logging
from pathlib import Path
from typing import Iterator, Sequence

import av

from ...errors import OutputError, StreamconvError, StreamError
from ..ffmpeg.container import read_container
from ..ffmpeg.copyout import CopiedOutput
from ..ffmpeg.damage import copied_damage, reported_damage, truncation
from ..ffmpeg.demux import Demux
from ..ffmpeg.log import DamageLog
from ..ffmpeg.formats import output_format
from ..ffmpeg.streamcopy import CopiedStreams
from .targets import open_target

log = logging.getLogger(__name__)


def join_parts(parts: Sequence[Path], output: str | Path, *, source: str | Path,
               copy_streams: bool = True, overwrite: bool = False, format: str | None = None,
               muxer_options: dict[str, str] | None = None, shift: int = 0) -> list[str]:
    """Write ``output`` from the parts' video packets and the input's audio/subtitle packets.

    Args:
        parts: the segments' encoded files (video only), in order.
        output: the output file, published whole (:class:`streamconv.files.publish.AtomicFile`):
            never the input, an existing file replaced only with ``overwrite``.
        source: the input file, for its audio and subtitle streams (and never overwritten).
        copy_streams: copy the input's audio and subtitle streams (False: video only).
        format: the output's container (None: by extension).
        muxer_options: the output muxer's FFmpeg options.
        shift: whole seconds the parts' pts were moved by, taken off again (see
            :func:`streamconv.io.sources.segment.pts_shift`).

    Returns:
        What was found wrong with the input's copied streams, one phrase per kind (empty:
        nothing), as a one-piece run's source finds it: packets flagged or failing to decode
        (copied as they are), packets the muxer refused (left out), FFmpeg's lines about them,
        streams left out or without packets. The video's damage is the segments' to find.

    Raises:
        StreamError: the parts' codec descriptions differ, or a part cannot be read.
        OutputError: the output cannot be written or published; nothing is left behind.
    """
    target = open_target(output, overwrite=overwrite, protect=(str(source),), format=format)
    containers = [_open_part(part) for part in parts]
    try:
        _check_alike(containers, parts)
        handle = target.create()
        try:
            damage = _remux(containers, handle, output, source, copy_streams, format, muxer_options,
                            shift)
        except BaseException:
            target.discard()
            raise
        target.publish()
        if damage:  # as a segment's pipeline says the video's
            log.warning("input damaged: %s", "; ".join(damage))
        return damage
    finally:
        for container in containers:
            container.close()


def _open_part(part: Path):
    try:
        return av.open(str(part))
    except (av.FFmpegError, OSError) as exc:
        raise StreamError(f"cannot read the segment {part.name}: {exc}") from None


def _check_alike(containers: Sequence, parts: Sequence[Path]) -> None:
    """Every part holds one video stream of the first part's codec, size and extradata."""
    for container, part in zip(containers, parts):
        if not container.streams.video:
            raise StreamError(f"the segment {part.name} has no video stream")
    first = containers[0].streams.video[0].codec_context
    for container, part in zip(containers, parts):
        context = container.streams.video[0].codec_context
        if (context.name, context.width, context.height) != (first.name, first.width, first.height):
            raise StreamError(f"the segment {part.name} is {context.name} "
                              f"{context.width}x{context.height}, "
                              f"the first {first.name} {first.width}x{first.height}: they cannot "
                              "be joined")
        if bytes(context.extradata or b"") != bytes(first.extradata or b""):
            raise StreamError(f"the segment {part.name} was encoded with other codec parameters "
                              "(extradata) than the first; they cannot be joined without "
                              "re-encoding")


def _remux(containers: Sequence, handle, output, source, copy_streams: bool, format: str | None,
           muxer_options: dict[str, str] | None, shift: int) -> list[str]:
    """Mux the parts' video and the input's copied packets, interleaved by time, into ``handle``;
    what was found wrong with the copied streams (see :func:`join_parts`)."""
    try:
        out = av.open(handle, mode="w", format=output_format(output, format),
                      container_options=dict(muxer_options or {}))
    except (av.FFmpegError, ValueError, OSError) as exc:
        raise OutputError(f"cannot write {output}: {exc}") from None
    try:
        with out, read_container(str(source)) as original:
            return _mux_all(out, containers, original, output, source, copy_streams, shift,
                            dict(muxer_options or {}))
    except (av.FFmpegError, OSError) as exc:  # the trailer, written as the output closes
        raise _failure(exc, output) from None


def _mux_all(out, containers: Sequence, original, output, source, copy_streams: bool, shift: int,
             muxer_options: dict[str, str]) -> list[str]:
    """The body of :func:`_remux`: ``out``'s streams, then the packets."""
    template = containers[0].streams.video[0]
    video = out.add_stream_from_template(template)
    video.time_base = template.time_base
    out.metadata.update(containers[0].metadata)
    video.metadata.update(template.metadata)
    wanted = [s for s in original.streams if copy_streams and s.type in ("audio", "subtitle")]
    # Checked as a one-piece run's source checks them, since only the join reads them here.
    checked = CopiedStreams(str(source), wanted, truncation(str(source), original.format.name))
    copies = CopiedOutput(out, checked.streams, output, muxer_options=muxer_options)
    watch = DamageLog(_components(original, checked.counted_streams)).start()
    try:
        for packet in heapq.merge(_video_packets(containers, shift),
                                  _packets(original, checked.counted_streams), key=_seconds):
            if packet.stream.type == "video":  # only the parts' video is demuxed
                packet.stream = video
                _mux(out, packet, output)
            elif checked.check(packet):
                _mux_copied(out, packet, copies, output)
    finally:
        watch.stop()
        copies.close()
    return (copied_damage(checked.damaged, copies.refused) + reported_damage(watch.count) +
            checked.stream_damage(True))


def _components(container, streams: Sequence) -> set[str]:
    """The FFmpeg components whose lines tell of damage in the copied streams: the input's
    demuxer and their decoders (the video's are the segments' to watch)."""
    name = container.format.name
    return {name, *name.split(","),
            *(s.codec_context.name for s in streams if s.codec_context is not None)}


def _video_packets(containers: Sequence, shift: int = 0) -> Iterator[av.Packet]:
    """The parts' video packets, part after part (each in its file's order), ``shift`` seconds
    earlier (the input's own pts again).

    The dts must keep rising, which each part's own do only within it. Matroska stores no dts,
    so a part's first packets of reordered video (B-frames) come back without one, and the
    muxer would guess one below the previous part's last; and an encoder gives a part's first
    packets dts from that part's own pts, before its first keyframe, which with irregular frame
    times (variable frame rate) can be below the previous part's last, where MP4 refuses them.
    Such a packet gets the dts just after the last one (never past its pts: a part's pts all
    follow the previous part's).
    """
    last = None
    for container in containers:
        for packet in _packets(container, [container.streams.video[0]]):
            if shift:
                ticks = round(shift / packet.time_base)
                packet.pts = None if packet.pts is None else packet.pts - ticks
                packet.dts = None if packet.dts is None else packet.dts - ticks
            if last is not None and packet.pts is not None and \
                    (packet.dts is None or packet.dts <= last):
                packet.dts = min(last + 1, packet.pts)
            last = packet.dts if packet.dts is not None else last
            yield packet


def _packets(container, streams: Sequence) -> Iterator[av.Packet]:
    """The packets of ``streams`` that hold data (demuxing ends each with an empty one)."""
    if not streams:
        return
    for packet in Demux(container, streams):  # streams added mid-input: the segments' to report
        if packet.size:
            yield packet


def _seconds(packet: av.Packet) -> float:
    """When a packet is due in the file (its dts, else pts, in seconds): the muxing order."""
    stamp = packet.dts if packet.dts is not None else packet.pts
    return float(stamp * packet.time_base) if stamp is not None and packet.time_base else 0.0


def _mux_copied(out, packet: av.Packet, copies: CopiedOutput, output) -> None:
    """Mux a copied packet through ``copies`` (one the muxer refuses is left out and counted,
    as a one-piece run leaves it out)."""
    try:
        copies.mux(out, packet)
    except OSError as exc:
        raise _failure(exc, output) from None


def _mux(out, packet: av.Packet, output) -> None:
    try:
        out.mux(packet)
    except (av.FFmpegError, OSError) as exc:
        raise _failure(exc, output) from None


def _failure(exc: BaseException, output) -> StreamconvError:
    """The error of a failed write into ``output``: an OutputError where the system refused it
    (a full disk), else a StreamError."""
    if isinstance(exc, OSError):
        return OutputError(f"writing {output} failed: {exc.strerror or exc}")
    return StreamError(f"joining the segments into {output} failed: {exc}")
