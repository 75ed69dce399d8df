"""Clips with audio and subtitle streams, and the packets a copy must keep."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


FPS, SAMPLE_RATE, SAMPLES = 30, 48000, 1024


def make_clip(path, *, frames: int = 30, audio_codec: str = "aac",
              sample_format: str = "fltp") -> None:
    """An H.264 clip of ``frames`` 64x48 frames with a stereo sine track of the same length
    (``sample_format`` fltp, or s16 for the encoders that take integers: flac, pcm_s16le)."""
    with av.open(str(path), "w") as container:
        video = container.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = container.add_stream(audio_codec, rate=SAMPLE_RATE)
        audio.codec_context.layout = "stereo"
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 8 * index, np.uint8),
                                               format="rgb24")
            frame.pts = index
            for packet in video.encode(frame):
                container.mux(packet)
        total = frames * SAMPLE_RATE // FPS
        for start in range(0, total, SAMPLES):
            t = (np.arange(SAMPLES) + start) / SAMPLE_RATE
            wave = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            samples = np.stack([wave, wave])
            if sample_format == "s16":  # packed: L R L R ...
                samples = (samples.T.reshape(1, -1) * 32767).astype(np.int16)
            chunk = av.AudioFrame.from_ndarray(samples, format=sample_format, layout="stereo")
            chunk.sample_rate, chunk.pts, chunk.time_base = SAMPLE_RATE, start, Fraction(
                1, SAMPLE_RATE)
            for packet in audio.encode(chunk):
                container.mux(packet)
        for stream in (video, audio):
            for packet in stream.encode(None):
                container.mux(packet)


def audio_packets(path) -> list[tuple[float, bytes]]:
    """(pts in seconds, payload) of every audio packet, in file order."""
    with av.open(str(path)) as container:
        if not container.streams.audio:
            return []
        stream = container.streams.audio[0]
        return [(float(p.pts * p.time_base), bytes(p)) for p in container.demux(stream) if p.size]
