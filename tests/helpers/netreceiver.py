"""A one-publisher RTMP or RTSP server in a child process, made of FFmpeg's own listen modes.

``python tests/helpers/netreceiver.py URL FORMAT OPTIONS_JSON OUT.npy`` opens URL with PyAV as a
server (the options say ``listen``), takes one publisher, decodes every frame it sends to RGB and
saves them, stacked, to OUT.npy. FORMAT is the demuxer, or ``-`` for the one the URL picks.

FFmpeg's RTMP server reports the publisher hanging up as an I/O error (EIO), not as the end of
the stream: after at least one packet that error is taken as the end, and the frames still
inside the decoder are drained.
"""

from __future__ import annotations

import errno
import json
import sys

import av
import numpy as np

WAIT_SECONDS = 20
"""How long the server waits for its publisher, and then for each read."""


def receive(url: str, format: str | None, options: dict[str, str]) -> list[np.ndarray]:
    frames: list[np.ndarray] = []
    with av.open(url, format=format, options=options, timeout=WAIT_SECONDS) as container:
        stream = container.streams.video[0]
        packets = 0
        try:
            for packet in container.demux(stream):
                packets += 1
                frames.extend(frame.to_ndarray(format="rgb24") for frame in packet.decode())
        except av.FFmpegError as exc:
            if not (packets and exc.errno == errno.EIO):
                raise
            frames.extend(frame.to_ndarray(format="rgb24")
                          for frame in stream.codec_context.decode(None))
    return frames


def main(url: str, format: str, options: str, out: str) -> None:
    frames = receive(url, None if format == "-" else format, json.loads(options))
    np.save(out, np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8))


if __name__ == "__main__":
    main(*sys.argv[1:])
