"""The process an ``rtmp://`` or ``rtmps://`` output is sent from (see
:mod:`streamconv.io.sinks.relay`).

Usage: ``python relay_child.py URL SECONDS``. It connects to URL with FFmpeg's own RTMP client,
then sends it the FLV that comes in on standard input (the run's muxer writes it), unchanged.

FFmpeg's RTMP connection has no time limit (PyAV opens it without options), and PyAV holds the
interpreter lock while it connects, so a server that accepts and never answers, or stops
reading, would hold a process for ever, deaf to signals. Each call that waits on the server
runs here under an interval timer: after SECONDS of waiting, SIGALRM's default action ends the
process (the kernel's doing: no lock needed), which the parent reports. Reading standard input
is never timed: the run may be slow.

Standard error gets ``connected`` once the server accepted the stream, then at most one line
saying why sending failed. Exit 0: everything was sent and the stream ended.

This file imports only the standard library and PyAV, so that it starts fast as a script.
"""

import logging
import signal
import sys

import av
import av.logging

CONNECTED = "connected"
"""The line written once the server accepted the stream (handshake, connect and publish)."""
CHUNK_BYTES = 1 << 16
"""The most bytes read from standard input, and sent, at a time."""


def timed(seconds: float, call, *args):
    """``call(*args)``, ending the process by SIGALRM if it takes more than ``seconds``."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def relay(url: str, seconds: float) -> None:
    """Connect to ``url`` (handshake, connect, publish), then send it standard input's bytes
    until standard input ends. FFmpeg's RTMP protocol reads the FLV itself, tag by tag; the
    ``data`` muxer hands it the bytes as they come, one flush per read."""
    target = av.open(url, "w", format="data", container_options={"flush_packets": "1"})
    stream = target.add_data_stream()
    timed(seconds, target.start_encoding)
    sys.stderr.write(CONNECTED + "\n")
    sys.stderr.flush()
    while True:
        chunk = sys.stdin.buffer.read1(CHUNK_BYTES)  # what has come, as soon as anything has
        if not chunk:
            break
        packet = av.Packet(chunk)
        packet.stream = stream
        timed(seconds, target.mux, packet)
    timed(seconds, target.close)


class FFmpegErrors(logging.Handler):
    """FFmpeg's error lines, as PyAV passes them to logging: its exceptions carry only an errno
    (an untrusted rtmps certificate is "Input/output error"), the log says why."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage().strip()
        if line and line not in self.lines:
            self.lines.append(line)


def main(url: str, seconds: str) -> int:
    # The run's signals are its own: it finishes the stream by closing standard input.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    errors = FFmpegErrors()
    logging.getLogger("libav").addHandler(errors)
    logging.getLogger("libav").propagate = False  # standard error carries this process's own lines
    av.logging.set_level(av.logging.ERROR)
    try:
        relay(url, float(seconds))
    except (av.FFmpegError, OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, av.FFmpegError) and exc.strerror else str(exc)
        said = "; ".join([line for line in errors.lines  # those that add to the reason
                          if reason.lower() not in line.lower()
                          and not line.startswith("Cannot open connection")][:2])
        sys.stderr.write(f"{reason} ({said})\n" if said else f"{reason}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
