"""The NVDEC source: a video file or stream demuxed by PyAV and decoded on the GPU by
PyNvVideoCodec.

Everything a FileSource does around decoding stays (its demuxer, timestamps, audio and subtitle
copies, colour tags, rotation, damage counting); the video packets go to the GPU's hardware
decoder instead of libavcodec, and the decoded surface (NV12, or P016 for 10 and 12 bits) stays
in device memory. ``read_into`` turns it into a slot's flat 4:2:0 planes with one kernel
(colour.cu's ``semi_planar_to_planes``): straight into the slot's device buffer for a CUDA
backend (a :class:`streamconv.frames.slots.DeviceInput`: no host copy, no upload), or into host
memory for any other consumer.

Each keyframe is also decoded by libavcodec (keyframes only, a few per second at most): it gives
the stream's pixel format, range and side data, and shows a change of size or depth, on which the
hardware decoder is drained and made anew. The work runs in the thread that reads (the ring's
reader), on the source's own CUDA stream in the device's primary context; a slot's backend waits
on the event the source records after writing it.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterator

import av
import numpy as np

from ....errors import FrameFormatError, StreamError
from ....frames.slots import DeviceInput
from ..file import FileSource
from .bitstream import (_ANNEX_B, _SEQUENCE_NAL_TYPES, _first_picture_kind, _sequence_header,
                        _undiscarded, codec_name, sequence_parameter_sets)
from .caps import CODECS, NvdecUnsupported, check_stream, nvdec_module
from .gpu import DecodedSurface, NvdecGpu
from .log import DecodeErrorLog, flush_c_stdout
from ....frames.yuv import YuvLayout, frame_to_planes, planes_format, planes_to_frame

log = logging.getLogger(__name__)


class NvdecSource(FileSource):
    """Decodes a video file or stream on the GPU (NVDEC), the frames left in device memory.

    Args:
        path: anything FFmpeg opens (a file path or URL).
        device: the CUDA device whose decoder runs (the backend must use the same one to take
            the frames in place).
        fallback: when the stream changes mid-way to one NVDEC cannot take (a size or depth
            beyond it), decode the rest with libavcodec (with a warning; frames still reach a
            DeviceInput, uploaded) instead of failing with a StreamError.
        options: FileSource's (``video_stream``, ``copy_streams``, ``max_pixels``, ``timeout``,
            ``depth``).

    Frames are delivered as FileSource's are (``read_into`` a host buffer: RGB or planes), and
    also into a slot's device planes (``read_into(DeviceInput)``). Damage counts, besides
    FileSource's, the pictures NVDEC reports decoded with errors (``concealed``).

    Raises:
        NvdecUnsupported: PyNvVideoCodec missing, or a stream this GPU's NVDEC cannot take
            (codec, chroma format, depth, size); the CPU decoder can take it instead.
        InputError: as FileSource raises it, and FileSource's other errors.
    """

    name = "nvdec"
    device_frames = True

    def __init__(self, path: str | Path, *, device: int = 0, fallback: bool = False,
                 **options) -> None:
        options.pop("hwaccel", None)
        self._fallback = fallback
        # libavcodec, after a change NVDEC cannot take
        self._software: av.CodecContext | None = None
        self._software_from: int | None = None
        options["threads"] = "SLICE"  # libavcodec decodes keyframes only, each at once
        self.device = device
        self._nvc = nvdec_module()
        self._gpu: NvdecGpu | None = None
        self._decoder = None
        self._decoded_as: tuple[int, int, int] | None = None  # (width, height, bits) of the decoder
        self._errors = DecodeErrorLog()
        self._first_picture: av.VideoFrame | None = None
        self._delivered = 0
        self.decoder_memory = 0
        try:
            super().__init__(path, **options)
        except BaseException:
            self._close_gpu()
            raise

    @property
    def decoder(self) -> str:
        """Which decoder runs, for logs and stats."""
        then = f", cpu from frame {self._software_from}" if self._software_from is not None else ""
        return f"nvdec ({codec_name(self._stream)}, device {self.device}{then})"

    # -- decoding ---------------------------------------------------------------------------

    def _stream_picture(self) -> av.VideoFrame:
        return self._first_picture

    def _pixel_format(self, frame) -> str:
        return frame.format.name if isinstance(frame, av.VideoFrame) else planes_format(frame.bits)

    def _decode(self) -> Iterator[DecodedSurface]:
        """Demux, watch the keyframes, decode on the GPU; the decoder's last frames come at the
        end."""
        self._gpu = NvdecGpu(self.device)
        self._errors.open()
        codec = codec_name(self._stream)
        bitstream = av.bitstream.BitStreamFilterContext(_ANNEX_B[codec], self._stream) \
            if codec in _ANNEX_B else None
        self._prefix = _sequence_header(self._stream) if codec in ("av1", "mpeg4") else b""
        extradata = bytes(self._stream.codec_context.extradata or b"")
        self._length_prefixed = codec in _SEQUENCE_NAL_TYPES \
            and extradata[:1] == b"\x01"  # avcC / hvcC
        self._last_sets = b""
        # libavcodec only describes keyframes here: their pixels are never used.
        self._stream.codec_context.options = {"skip_loop_filter": "all", "skip_idct": "all"}
        # NVDEC carries each packet's pts to a frame (its HEVC parser hands them out in sorted
        # order, so they must be the pts); by it, the packet's duration and discard flag (an edit
        # list's lead-in, negative pts, which libavcodec drops). Packets without pts get numbers
        # below any pts.
        self._packets: dict[int, tuple[int | None, bool]] = {}
        self._no_pts = _NO_PTS
        self._skip_rasl = codec == "hevc"
        for packet in self._video_packets():
            if self._software is None and packet.is_keyframe and self._worth_watching(packet):
                try:
                    yield from self._watch(packet)
                except _Refused as refused:
                    yield from self._to_software(str(refused))
            if self._software is not None:
                yield from self._decode_in_software(packet)
                continue
            if self._decoder is None:  # before the first keyframe: nothing to decode it against
                self._damage.decode_errors += 1
                continue
            timing = packet.pts, packet.duration, packet.is_discard
            try:
                filtered = bitstream.filter(packet) if bitstream is not None else [packet]
            except av.FFmpegError:  # a packet too damaged to restructure: skipped,
                self._damage.decode_errors += 1  # as libavcodec would
                continue
            for part in filtered:
                yield from self._decode_bytes(bytes(part), *timing)
        if bitstream is not None and self._software is None:
            for filtered in bitstream.filter(None):
                yield from self._decode_bytes(bytes(filtered), filtered.pts, filtered.duration,
                                              False)
        yield from self._drain()
        if self._software is not None:
            yield from self._decode_in_software(None)
        self._raise_read_error()

    def _worth_watching(self, packet: av.Packet) -> bool:
        """Whether a keyframe may start another size or depth: always for the first, and for
        codecs whose sequence headers are not read here; H.264 and HEVC only when the sequence
        parameter sets they carry in the stream differ from the last ones (in MP4 and Matroska
        they live in the container's header and cannot change)."""
        codec = codec_name(self._stream)
        if codec not in _SEQUENCE_NAL_TYPES:
            return True
        sets = b"" if self._length_prefixed else sequence_parameter_sets(bytes(packet), codec)
        changed = bool(sets) and sets != self._last_sets
        self._last_sets = sets or self._last_sets
        return self._first_picture is None or changed

    def _watch(self, packet: av.Packet) -> Iterator[DecodedSurface]:
        """Decode a keyframe with libavcodec: the first one describes the stream; one of another
        size or depth drains the hardware decoder and makes a new one for it."""
        context = self._stream.codec_context
        # libavcodec returns no picture for it; NVDEC starts there all the same
        if packet.is_discard:
            packet = _undiscarded(packet)
        try:
            pictures = [*context.decode(packet), *context.decode(None)]
        except av.FFmpegError:
            pictures = []  # FFmpeg's log counts it; NVDEC still gets the packet
        context.flush_buffers()
        if not pictures:
            return
        picture = pictures[-1]
        if self._first_picture is None:
            self._first_picture = picture
        bits = self._depth_of(picture)
        wanted = (picture.width, picture.height, bits)
        if wanted == self._decoded_as:
            return
        if self._decoder is not None:
            yield from self._drain()
        self._new_decoder(*wanted)

    def _depth_of(self, picture: av.VideoFrame) -> int:
        """The depth NVDEC decodes ``picture``'s stream in. NvdecUnsupported before any frame is
        decoded; _Refused after (NVDEC's last frames still go out first)."""
        try:
            return check_stream(self.device, codec_name(self._stream), picture.format.name,
                                picture.width, picture.height, bool(picture.interlaced_frame))
        except NvdecUnsupported as exc:
            if self._decoder is None:
                raise
            raise _Refused(str(exc)) from None

    def _to_software(self, reason: str) -> Iterator[DecodedSurface]:
        """NVDEC's last frames; then, with ``fallback``, libavcodec (a context of its own, decoding
        every pixel) from here on, else a StreamError saying why."""
        yield from self._drain()
        if not self._fallback:
            raise StreamError(f"{self.path}: the stream changes after frame {self._index} to one "
                              f"NVDEC cannot decode ({reason}); --decoder cpu (or auto) decodes it "
                              "in software")
        log.warning("%s: the stream changes after frame %d to one NVDEC cannot decode (%s); "
                    "decoding on the CPU from there", self.path, self._index, reason)
        with self._gpu.active():
            self._decoder = None
        context = av.CodecContext.create(self._stream.codec_context.name, "r")
        context.extradata = self._stream.codec_context.extradata
        context.thread_type = "AUTO"
        self._software = context

    def _decode_in_software(self, packet: av.Packet | None) -> list[av.VideoFrame]:
        """libavcodec's frames for ``packet`` (None: the ones it still holds), damage counted as
        FileSource does."""
        return self._decoded(self._software.decode, packet)

    def _new_decoder(self, width: int, height: int, bits: int) -> None:
        nvc, gpu = self._nvc, self._gpu
        with gpu.active():
            self._decoder = None  # the old one is destroyed with its context current
            free_before, _ = gpu.binding.mem_get_info()
            codec = getattr(nvc.cudaVideoCodec, CODECS[codec_name(self._stream)])
            self._decoder = nvc.CreateDecoder(gpuid=self.device, codec=codec,
                                              cudacontext=gpu.context.handle,
                                              cudastream=gpu.stream.handle, usedevicememory=True)
        self._decoded_as = (width, height, bits)
        self._memory_before = free_before
        log.info("%s: NVDEC decodes %s %dx%d %d-bit on device %d", self.path,
                 codec_name(self._stream), width, height, bits, self.device)

    def _decode_bytes(self, data: bytes, pts: int | None, duration: int | None,
                      discard: bool) -> Iterator[DecodedSurface]:
        """Hand one packet's bytes to NVDEC; the frames it gives back (display order), but for those
        of packets flagged ``discard``."""
        if not data:
            return
        if self._prefix:
            data, self._prefix = self._prefix + data, b""
        if self._skip_rasl and self._leading_to_skip(data):
            return
        if pts is None:
            pts, self._no_pts = self._no_pts, self._no_pts + 1
        self._packets[pts] = (duration, discard)
        buffer = np.frombuffer(data, np.uint8)
        packet = self._nvc.PacketData()
        packet.bsl_data, packet.bsl, packet.pts = buffer.ctypes.data, buffer.size, pts
        yield from self._surfaces(packet)

    def _leading_to_skip(self, data: bytes) -> bool:
        """Whether an HEVC packet is a RASL picture of the CRA the decoding starts at (a cut or a
        seek into an open GOP): libavcodec drops them undecoded; given to NVDEC, which drops them
        too, their pts would go to other frames. Leading pictures all come before the first
        trailing one, which ends the skipping."""
        kind = _first_picture_kind(data)
        if kind is not None and kind <= 5:  # TRAIL, TSA, STSA
            self._skip_rasl = False
        return kind in (8, 9)  # RASL_N, RASL_R

    def _drain(self) -> Iterator[DecodedSurface]:
        """The frames the hardware decoder still holds (end of stream, or before a new decoder)."""
        if self._decoder is not None:
            yield from self._surfaces(self._nvc.PacketData())

    def _count_decoder_memory(self) -> None:
        """Device memory the decoder took by its first frame (its surfaces), for the log."""
        free_after, _ = self._gpu.binding.mem_get_info()
        self.decoder_memory = max(1, self._memory_before - free_after)
        log.info("%s: the NVDEC session holds %.0f MiB of device memory", self.path,
                 self.decoder_memory / 2**20)

    def _surfaces(self, packet) -> Iterator[DecodedSurface]:
        try:
            with self._gpu.active():
                # The last call's surfaces are reused by this one, and not in our stream's order:
                # the conversions queued from them must have run (a busy GPU delays them).
                self._gpu.stream.synchronize()
                frames = self._decoder.Decode(packet)
                if frames and not self.decoder_memory:
                    self._count_decoder_memory()
        except Exception as exc:  # PyNvVideoCodec raises its own types
            reason = " ".join(line.strip() for line in str(exc).splitlines()
                              if not line.strip().startswith("at "))
            # before its first frame: the stream is one it refuses (e.g. 4:0:0)
            if not self.decoder_memory:
                raise NvdecUnsupported(f"NVDEC refused the stream: {reason}") from None
            raise StreamError(f"NVDEC failed decoding {self.path} after {self._index} frames: "
                              f"{reason} (--decoder cpu decodes it in software)") from None
        finally:
            flush_c_stdout()  # its decode-error lines reach the counter now
        width, height, bits = self._decoded_as
        for frame in frames:
            pts = int(frame.timestamp)
            duration, discard = self._packets.pop(pts, (None, False))
            if not discard:
                yield DecodedSurface(width, height, bits, int(frame.GetPtrToPlane(0)),
                                     int(frame.GetPtrToPlane(1)),
                                     pts if pts >= _NO_PTS // 2 else None, self.time_base, duration)

    # -- delivery ---------------------------------------------------------------------------

    def _deliver(self, frame: DecodedSurface | av.VideoFrame, buffer) -> None:
        """Write the surface (or, after a fallback, libavcodec's frame) into a slot's device planes
        (a DeviceInput) or a host buffer."""
        gpu = self._gpu
        if isinstance(frame, av.VideoFrame) and self._software_from is None:
            self._software_from = self._index
        if isinstance(buffer, DeviceInput):
            if self.planes is None or buffer.layout.shape != self.planes.shape \
                    or buffer.layout.dtype != self.planes.dtype:
                raise FrameFormatError(f"device planes of {buffer.layout.describe()} "
                                       f"{buffer.layout.width}x{buffer.layout.height} for "
                                       f"{self.width}x{self.height} frames")
            with gpu.active():
                if isinstance(frame, av.VideoFrame):
                    planes = np.empty(buffer.layout.shape, buffer.layout.dtype)
                    frame_to_planes(planes, frame, buffer.layout)
                    gpu.upload(planes, buffer.address)
                else:
                    gpu.convert(frame, buffer.address)
                buffer.written.record(gpu.stream)
            return
        if isinstance(frame, av.VideoFrame):
            super()._deliver(frame, buffer)
            return
        layout = YuvLayout(frame.width, frame.height, self.colour, self.colour.range == 2,
                           frame.bits)
        with gpu.active():
            planes = gpu.to_host(frame, layout)
        pix_fmt = "yuvj420p" if self._described.format.name == "yuvj420p" and frame.bits == 8 \
            else layout.pix_fmt
        super()._deliver(planes_to_frame(planes, layout, pix_fmt, self.colour), buffer)

    @property
    def concealed(self) -> int:
        """Packets or frames flagged as damaged: by the demuxer, and pictures NVDEC decoded with
        errors."""
        return self._damage.concealed + self._errors.count

    def damage(self) -> list[str]:
        errors = self._errors.count
        self._damage.concealed += errors
        try:
            return super().damage()
        finally:
            self._damage.concealed -= errors

    def _release(self) -> None:
        super()._release()
        self._close_gpu()

    def _close_gpu(self) -> None:
        if self._gpu is not None:
            gpu, self._gpu = self._gpu, None
            with contextlib.suppress(*gpu.binding.errors), gpu.active():
                self._decoder = None  # destroyed while its context is current and still held
            gpu.close()
        self._decoder = None
        self._errors.close()


_NO_PTS = -(2**62)
"""Numbers given to packets without pts (counting up): far below any real pts, even a negative
one."""


class _Refused(Exception):
    """The stream changes mid-way to one NVDEC cannot take (the message says why)."""
