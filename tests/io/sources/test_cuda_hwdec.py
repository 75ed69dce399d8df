"""Decoding on the GPU's hardware decoder (--hwaccel cuda, NVDEC): its nv12 / p010le frames
come back to host memory and travel as yuv420p / yuv420p10le planes, equal to software
decoding's, frame for frame."""

from __future__ import annotations

import av
import numpy as np
import pytest

from streamconv.io.sources.file import FileSource
from streamconv.frames.yuv import YuvLayout, planes_to_frame

from helpers.yuv import make_clip

pytestmark = pytest.mark.cuda


def planes_of_every_frame(source: FileSource) -> list[np.ndarray]:
    frames = []
    while True:
        buffer = np.full(source.planes.shape, 0xA5, source.planes.dtype)
        if source.read_into(buffer) is None:
            return frames
        frames.append(buffer)


def assert_hardware_decodes_like_software(clip, pix_fmt: str) -> None:
    with FileSource(clip, hwaccel="cuda") as hardware, FileSource(clip) as software:
        assert hardware.hardware_decoding
        assert "(decoded on cuda)" in hardware.describe()
        assert hardware.planes == software.planes and hardware.planes.pix_fmt == pix_fmt
        got, expected = planes_of_every_frame(hardware), planes_of_every_frame(software)
    assert len(got) == len(expected) > 0
    for index, (frame, reference) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(frame, reference, err_msg=f"frame {index}")


def test_nvdec_h264_gives_the_software_planes(sample_clip):
    assert_hardware_decodes_like_software(sample_clip, "yuv420p")


def test_nvdec_hevc_10_bit_gives_the_software_planes(tmp_path):
    if "libx265" not in av.codecs_available:
        pytest.skip("this PyAV build has no libx265 to make a 10-bit HEVC clip")
    clip = tmp_path / "deep.mkv"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx265", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p10le"
        stream.options = {"x265-params": "log-level=error"}
        rng, layout = np.random.default_rng(3), YuvLayout(320, 240, bits=10)
        for index in range(8):
            samples = rng.integers(64, 940, layout.shape, dtype=np.uint16)
            # Copied in plane by plane: PyAV before 18 (the last for Python 3.10) has no yuv420p10le
            # from_ndarray.
            frame = planes_to_frame(samples, layout, "yuv420p10le", None)
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    assert_hardware_decodes_like_software(clip, "yuv420p10le")


def test_a_transcode_decoded_on_nvdec_equals_the_software_decoded_one(tmp_path, cli):
    clip = tmp_path / "in.mp4"
    make_clip(clip, 320, 240, 12)
    outputs = []
    for extra in ((), ("--hwaccel", "cuda")):
        out = tmp_path / f"out{len(outputs)}.mkv"
        result = cli("run", str(clip), "-o", str(out), "--backend", "cuda", "--filter",
                     "gaussian:sigma=2", "--codec", "ffv1", "--quiet", *extra)
        assert result.returncode == 0, result.stderr
        with av.open(str(out)) as container:
            outputs.append([frame.to_ndarray() for frame in container.decode(video=0)])
    assert len(outputs[0]) == len(outputs[1]) == 12
    for software, hardware in zip(*outputs):
        np.testing.assert_array_equal(hardware, software)


def test_a_codec_nvdec_cannot_decode_falls_back_to_software_with_a_warning(tmp_path, caplog):
    clip = tmp_path / "ffv1.mkv"
    rng = np.random.default_rng(5)
    expected = []
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(3):
            samples = rng.integers(0, 256, (72, 64), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(samples, format="yuv420p")
            frame.pts = index
            expected.append(samples.ravel())
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with caplog.at_level("WARNING", logger="streamconv"), FileSource(clip,
                                                                     hwaccel="cuda") as source:
        assert not source.hardware_decoding
        got = planes_of_every_frame(source)
    assert "cuda cannot decode ffv1 here; decoding in software" in caplog.text
    assert len(got) == 3
    for frame, reference in zip(got, expected):
        np.testing.assert_array_equal(frame, reference)
