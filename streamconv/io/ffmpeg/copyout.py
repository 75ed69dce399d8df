"""The input's audio and subtitle streams copied into an output container, each packet vetted
first by a muxer of its own.

A muxer may refuse a copied stream when the output starts (a pipe's Matroska cannot describe
AAC from MPEG-TS without the parameters only its packets carry), and a copied packet at any
time: a damaged one with timestamps going back, or a damaged FLV's AAC header packet whose
parameters cannot be parsed. A muxer holds packets back to interleave them, so such a packet
may fail only at the trailer, and with it the whole output. :class:`CopiedOutput` gives each
copied stream a proof muxer beside the output: the same format, options and seekability,
writing nowhere, with that one stream, so that it writes each packet at once. A stream the
proof refuses at the start is left out with a warning; a packet it refuses is left out, counted
and warned of once, and never reaches the output. File sinks of every kind (a file, a pipe, a
network URL) and the join of a segmented run copy through it.
"""

from __future__ import annotations

import errno
import io
import logging
from collections.abc import Sequence
from pathlib import Path

import av

from .damage import missing_parameters
from .log import logged_reason
from .metadata import stream_tags

log = logging.getLogger(__name__)


class CopiedOutput:
    """The copies of an input's audio/subtitle streams in one output container.

    Args:
        container: the output (PyAV, header not yet written).
        sources: the input streams (PyAV) whose packets are to be copied.
        path: the output's name (for messages; a URL's too).
        seekable: whether the output can be sought (a file; False: a pipe or a network URL).
        muxer_options: the output muxer's FFmpeg options.

    Attributes:
        streams: the output streams by input stream index (those left out are not there).
        refused: packets the muxer refused, left out.
    """

    def __init__(self, container, sources: Sequence, path, *, seekable: bool = True,
                 muxer_options: dict[str, str] | None = None) -> None:
        self.path, self.refused = Path(path), 0
        self.streams: dict[int, object] = {}
        self._proofs: dict[int, tuple[object, object]] = {}  # index -> (proof container, stream)
        options = dict(muxer_options or {})
        for source in sources:
            proof = self._proof(container.format.name, source, seekable, options)
            if proof is None:
                continue
            try:
                stream = container.add_stream_from_template(source)
                stream.metadata.update(stream_tags(source, encoded=False))
            except (av.FFmpegError, ValueError) as exc:
                log.warning("%s stream %d (%s) not copied: %s", source.type, source.index,
                            source.codec_context.name, exc)
                _close(proof[0])
                continue
            self.streams[source.index], self._proofs[source.index] = stream, proof

    def _proof(self, format_name: str, source, seekable: bool, options: dict[str, str]):
        """A started proof muxer (container, stream) for ``source``, or None: the stream is left
        out, with a warning (its parameters missing, or the muxer refuses it)."""
        missing = missing_parameters(source)
        if missing:
            log.warning("%s stream %d has no %s; not copied", source.type, source.index, missing)
            return None
        codec = source.codec_context.name
        if not _container_takes(format_name, source):
            log.warning("%s stream %d (%s) cannot be stored in %s; not copied (%s)", source.type,
                        source.index, codec, self.path.suffix or "this container",
                        _holder(codec, self.path.suffix))
            return None
        proof = None
        try:
            proof = av.open(_Nowhere(seekable), "w", format=format_name, container_options=options)
            stream = proof.add_stream_from_template(source)
            proof.start_encoding()
            return proof, stream
        except (av.FFmpegError, ValueError, OSError) as exc:
            log.warning("%s stream %d (%s) cannot be written to %s by its muxer (%s); not copied",
                        source.type, source.index, codec, self.path, logged_reason(exc))
            if proof is not None:
                _close(proof)
            return None

    def mux(self, output, packet) -> bool:
        """Write a packet of a copied stream into ``output`` (the container this was made for),
        its timestamps rescaled only; False where it was left out: its stream is not copied, or
        the muxer refused it (counted, the first warned of).

        Raises:
            OSError: writing into ``output`` failed (a full disk: an error number).
        """
        index = packet.stream.index
        target = self.streams.get(index)
        if target is None:
            return False
        proof, stream = self._proofs[index]
        return self._written(proof, stream, packet, index, proof=True) and \
            self._written(output, target, packet, index)

    def _written(self, container, stream, packet, index: int, *, proof: bool = False) -> bool:
        """Mux ``packet`` into ``container`` as a packet of ``stream``; False where the muxer
        refused it (a damaged packet: left out, not the run). A proof muxer writes nowhere: its
        errors are all refusals (Matroska's ENOSPC is a codec description larger than the room
        it kept for it, not a full disk)."""
        packet.stream = stream
        try:
            container.mux(packet)
            return True
        except (av.FFmpegError, ValueError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None and not proof:
                raise  # the system refused the write: the output's failure, not the packet's
            if not self.refused:
                reason = logged_reason(exc)
                if proof and getattr(exc, "errno", None) == errno.ENOSPC:
                    reason = "it kept too little room for what the packet brings (not a full disk)"
                log.warning("%s: a packet of %s stream %d that the muxer refused was left out: %s",
                            self.path, stream.type, index, reason)
            self.refused += 1
            return False

    def close(self) -> None:
        """Close the proof muxers (the output is the caller's). Idempotent."""
        proofs, self._proofs = self._proofs, {}
        for proof, _stream in proofs.values():
            _close(proof)


class _Nowhere(io.RawIOBase):
    """A file that keeps nothing written to it; seekable or not, as the output it stands for."""

    def __init__(self, seekable: bool) -> None:
        super().__init__()
        self._seekable, self._position, self._end = seekable, 0, 0

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def write(self, data) -> int:
        self._position += len(data)
        self._end = max(self._end, self._position)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if not self._seekable:
            raise OSError("not seekable")
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._end}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        return b""  # nothing was kept (a muxer reading its output back finds it empty)


def _close(container) -> None:
    """Close a proof muxer; its trailer, written nowhere, may fail: nothing depends on it."""
    try:
        container.close()
    except (av.FFmpegError, ValueError, OSError):
        pass


MPEGTS_CARRIES = frozenset({"aac", "aac_latm", "mp2", "mp3", "ac3", "eac3", "dts", "truehd", "opus",
                            "s302m", "dvb_subtitle", "dvb_teletext", "arib_caption"})
"""Audio and subtitle codecs MPEG-TS has a stream type for (FFmpeg's names); its muxer writes any
other (FLAC, PCM, SubRip...) as private data, which players and FFmpeg itself do not decode."""


def _ts_carries(decoder: str) -> bool:
    """Whether MPEG-TS has a stream type for the codec of ``decoder`` (a decoder's name:
    mp3float is mp3)."""
    return av.codec.Codec(decoder, "r").canonical_name in MPEGTS_CARRIES


def _container_takes(format_name: str, source) -> bool:
    """Whether a ``format_name`` muxer writes a file with a copy of ``source``: its header, and
    for PCM (whose packets are any bytes) a packet of silence and the trailer.

    PyAV's ``supported_codecs`` is no answer: it lists only a muxer's defaults where it keeps no
    table of codecs (MPEG-TS holds AAC, AC-3 and more), and codecs a muxer then refuses: MOV
    takes Opus and FLAC only as MP4, MP4 refuses PCM of an unnamed channel layout (Matroska's)
    only at the trailer. Refused there, the whole output would be lost. MPEG-TS takes anything,
    most of it as data nobody decodes: there, :data:`MPEGTS_CARRIES` decides.
    """
    if format_name == "mpegts":
        return _ts_carries(source.codec_context.name)
    try:
        with av.open(io.BytesIO(), "w", format=format_name) as probe:
            stream = probe.add_stream_from_template(source)
            probe.start_encoding()
            if source.codec_context.name.startswith("pcm_"):
                # 192 bytes a channel: whole samples of 1 to 4 bytes (and of 8).
                silence = av.Packet(bytes(192 * max(1, source.codec_context.channels)))
                silence.stream, silence.time_base = stream, source.time_base
                silence.pts = silence.dts = 0
                probe.mux(silence)
        return True
    except (av.FFmpegError, ValueError, OSError):
        return False


_HOLDERS = ((".mkv", "matroska"), (".mp4", "mp4"), (".mov", "mov"), (".ts", "mpegts"))


def _holder(codec: str, suffix: str) -> str:
    """Which common container would hold ``codec``: a hint for the warning."""
    for extension, format_name in _HOLDERS:
        if extension == suffix.lower():
            continue
        if format_name == "mpegts":
            if _ts_carries(codec):
                return f"{extension} holds it"
            continue
        try:
            with av.open(io.BytesIO(), "w", format=format_name) as probe:
                if codec in probe.supported_codecs:
                    return f"{extension} holds it"
        except (av.FFmpegError, ValueError):
            continue
    return "none of .mkv, .mp4, .mov and .ts holds it"
