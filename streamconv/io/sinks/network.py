"""Network outputs: frames encoded and sent to an ``rtmp://``, ``rtsp://``, ``srt://``, ``udp://``
or ``tcp://`` URL as they are filtered.

A NetworkSink is a FileSink whose target is a URL: the stream is published as it is written
(there is no temporary file to move into place, and what was sent before a failure has been
received), FFmpeg opens the connection at the first frame, and the encoder is set up for
viewers who join late (a keyframe every two seconds). Each URL scheme has its container:
FLV for RTMP, RTSP's own muxer for RTSP, MPEG-TS for SRT, UDP and TCP. PyAV sets FFmpeg's
global-header flag from the container, so FLV and RTSP carry the codec's parameter sets once,
up front, and MPEG-TS repeats them in-band at every keyframe, where a receiver that tunes in
later finds them.
"""

from __future__ import annotations

import errno
import logging
import time
from urllib.parse import parse_qs, urlsplit

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av

from ...errors import OutputError, StreamError
from ..ffmpeg.log import ffmpeg_reason
from ..ffmpeg.container import NETWORK_TIMEOUT
from .file import FileSink
from ..ffmpeg.formats import NETWORK_CONTAINERS
from ..spec import network_scheme
from .listen import ListeningTarget, listen_address, timeout_seconds
from .relay import RelayFailed, RelayTarget
from .targets import MuxedTarget

log = logging.getLogger(__name__)

QUERY_PROTOCOLS = ("tcp", "udp", "srt")
"""Protocols whose options FFmpeg reads from the URL's query (``tcp://host:port?listen=1``).
PyAV opens an output's connection without an options dictionary, so that is where the output
options reach them; RTSP's muxer opens its own connection and takes them as muxer options."""

RELAYED = ("rtmp", "rtmps")
"""Schemes sent from a child process (:mod:`streamconv.io.sinks.relay`): FFmpeg's RTMP connection
takes no time limit through PyAV. ``--output-option timeout=`` (microseconds) bounds each wait
on the server there, 10 s by default."""

CONNECTION_OPTIONS = ("tls_verify", "ca_file", "cafile", "cert_file", "key_file", "verifyhost",
                      "listen",
                      "listen_timeout", "tcp_nodelay", "send_buffer_size", "recv_buffer_size")
"""Options of FFmpeg's RTMP client's connection (and ``rtmp_*``), which PyAV opens without an
options dictionary: given as ``--output-option`` they would be ignored, so they are refused."""

KEYFRAME_SECONDS = 2.0
"""Seconds between keyframes of a network output (FFmpeg's ``g``, unless given): a viewer who
joins mid-stream waits at most this long for a picture."""


def with_query(url: str, options: dict[str, str]) -> str:
    """``url`` with ``options`` appended to its query as FFmpeg's protocols read it (``k=v&k=v``,
    not percent-encoded: FFmpeg does not decode it)."""
    if not options:
        return url
    query = "&".join(f"{key}={value}" for key, value in options.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _query_value(url: str, key: str) -> str | None:
    """The first value of ``key`` in a URL's query, or None."""
    values = parse_qs(urlsplit(url).query).get(key)
    return values[0] if values else None


class NetworkSink(FileSink):
    """Encodes RGB frames (or yuv420p planes) and sends them to a network URL with PyAV.

    Args:
        url: ``rtmp://``, ``rtmps://``, ``rtsp://``, ``srt://``, ``udp://`` or ``tcp://``.
        format: the muxer (``--format``; None: :data:`NETWORK_CONTAINERS` by scheme: flv, rtsp or
            mpegts).
        muxer_options: FFmpeg options of the output (``--output-option``): given to the muxer,
            and for tcp, udp and srt also to the protocol through the URL's query
            (``{"listen": "1"}`` waits for a receiver to connect).
        options: encoder options; ``g`` (the keyframe interval) defaults to
            :data:`KEYFRAME_SECONDS` of frames.
        other keyword arguments: FileSink's (``width``, ``height``, ``frame_rate``, ``codec``,
            ``crf``, ...); ``overwrite`` and ``protect`` do not apply.

    Frames are those FileSink takes: (H, W, 3) uint8 or uint16 RGB, or flat yuv420p planes, in
    host memory.

    Raises (from ``send``, at the first frame, when the connection is made):
        OutputError: (exit 6) the URL cannot be reached (connection refused, no such host).
        StreamError: (exit 8) sending failed after that (the receiver went away).
    """

    name = "network"

    def __init__(self, url: str, *, format: str | None = None,
                 muxer_options: dict[str, str] | None = None, options: dict[str, str] | None = None,
                 **kwargs) -> None:
        scheme = network_scheme(url)
        if scheme is None:
            raise OutputError(f"not a network output: {url} (expected one of "
                              f"{', '.join(s + '://' for s in NETWORK_CONTAINERS)})")
        muxer_options = dict(muxer_options or {})
        self._answer_within = None  # seconds the server has to answer (RTSP), for the message
        if scheme == "rtsp":  # a server that never answers would hold the interpreter lock for ever
            muxer_options.setdefault("timeout", str(int(NETWORK_TIMEOUT * 1e6)))
            self._answer_within = timeout_seconds(muxer_options["timeout"])
        query = muxer_options if scheme in QUERY_PROTOCOLS else {}
        if scheme == "tcp" and _query_value(str(url), "timeout") is None:
            # A receiver that stops reading would hold every send (a signal's finish too) for ever.
            query = {"timeout": str(int(NETWORK_TIMEOUT * 1e6)), **query}
        self._send_to = with_query(str(url), query)
        # seconds a receiver may take nothing (FFmpeg reads the first), for the message
        send_timeout = _query_value(self._send_to, "timeout") if scheme == "tcp" else None
        if scheme in RELAYED:  # the child's limit, in FFmpeg's unit: not an FLV muxer option
            send_timeout = muxer_options.pop("timeout", str(int(NETWORK_TIMEOUT * 1e6)))
        self._send_within = timeout_seconds(send_timeout) if send_timeout is not None else None
        if scheme in RELAYED and (self._send_within is None or self._send_within < 0):
            raise OutputError(f"--output-option timeout={send_timeout}: expected microseconds (0: "
                              "no limit) "
                              f"for {scheme}://")
        unreachable = [key for key in muxer_options if scheme in RELAYED and
                       (key.startswith("rtmp_") or key in CONNECTION_OPTIONS)]
        if unreachable:
            raise OutputError(f"--output-option {unreachable[0]}: an option of FFmpeg's RTMP "
                              "connection, which "
                              "PyAV opens without options, so it would be ignored (the "
                              "application and stream "
                              f"key go in the URL: {scheme}://HOST/APP/KEY; only timeout= is "
                              "taken)")
        encoder = {"g": str(max(1, round(KEYFRAME_SECONDS * float(kwargs["frame_rate"])))),
                   **(options or {})}
        super().__init__(str(url), format=format or NETWORK_CONTAINERS[scheme],
                         muxer_options=muxer_options, options=encoder, **kwargs)

    def _target(self, path, overwrite: bool, protect, format, muxer_options) -> MuxedTarget:
        """The URL itself: nothing local is checked, made or published. A listening tcp URL is
        waited on here (:mod:`streamconv.io.sinks.listen`: a signal must still stop the wait)."""
        listening = listen_address(self._send_to)
        if listening is not None:
            return ListeningTarget(str(path), *listening)
        if network_scheme(self._send_to) in RELAYED:
            return RelayTarget(str(path), self._send_to, self._send_within)
        return MuxedTarget(str(path), self._send_to)  # FFmpeg opens the URL itself

    def _write_header(self) -> None:
        """Connect (or, with ``listen``, wait for a receiver) with the header, at the first frame,
        rather than at the encoder's first packet some frames later: any failure is the URL's."""
        started = time.monotonic()
        try:
            self._container.start_encoding()
        except (av.FFmpegError, OSError) as exc:
            self.failed = True
            self.abort()
            within = self._answer_within
            silent = within is not None and time.monotonic() - started >= 0.9 * within
            note = f" (no answer within {within:g} s)" if silent else ""
            raise OutputError(f"cannot send to {self.path}: {ffmpeg_reason(exc)}{note}") from None

    def _raise_write_error(self, exc: BaseException, doing: str) -> None:
        """Sending failed after the connection was made (the receiver went away)."""
        self.failed = True
        self.abort()
        timed_out = isinstance(exc, TimeoutError) or getattr(exc, "errno", None) == errno.ETIMEDOUT
        note = f" (the receiver took nothing for {self._send_within:g} s)" if timed_out and \
            self._send_within else ""
        # an RTMP output's child ended, saying why (its own limit named likewise)
        reason = self._file.reason(exc) if isinstance(exc, RelayFailed) \
            else f"{ffmpeg_reason(exc)}{note}"
        raise StreamError(f"sending to {self.path} failed after {self.frames_written} frames "
                          f"({doing}): {reason}") from None

    def abort(self, *, keep_finished: bool = False) -> None:
        """As FileSink's; an RTMP output's child is stopped first, so that the container's
        close writes into a pipe nobody waits on rather than one a stalled server fills."""
        if isinstance(self._file, RelayTarget):
            self._file.discard()
        super().abort(keep_finished=keep_finished)

    def describe(self) -> str:
        return f"{self.path} ({self.format}, {self.codec_name})"
