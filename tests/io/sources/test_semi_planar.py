"""Semi-planar input (nv12, p010le: what hardware decoders give) travels as yuv420p /
yuv420p10le planes, and --hwaccel refuses what it cannot do with a clear error."""

from __future__ import annotations

import av
import numpy as np
import pytest

import streamconv
from streamconv.errors import InputError
from streamconv.io.ffmpeg.container import hardware_decoders
from streamconv.io.sources.file import FileSource
from streamconv.frames.yuv import (SEMI_PLANAR_FORMATS, YuvLayout, frame_to_planes, planes_to_frame,
                                   split_semi_planar)

EXIT_USAGE = 2


def random_planes_frame(rng, width: int, height: int, pix_fmt: str) -> av.VideoFrame:
    """A frame of random planes (yuv420p, or yuv420p10le with 10-bit code values), copied in
    plane by plane: PyAV before 18 (the last for Python 3.10) has no yuv420p10le from_ndarray."""
    layout = YuvLayout(width, height, bits=8 if pix_fmt == "yuv420p" else 10)
    samples = rng.integers(0, 1 << layout.bits, layout.shape, dtype=layout.dtype)
    return planes_to_frame(samples, layout, pix_fmt, None)


def rows_of(plane, dtype, rows: int) -> np.ndarray:
    return np.frombuffer(plane, dtype).reshape(rows, -1)


@pytest.mark.parametrize("planar, semi", [("yuv420p", "nv12"), ("yuv420p10le", "p010le")])
def test_semi_planar_frames_split_into_the_planar_layout(rng, planar, semi):
    width, height = 38, 22  # odd half-width: chroma rows of 19 pairs, decoder rows padded
    frame = random_planes_frame(rng, width, height, planar)
    interleaved = frame.reformat(format=semi)  # FFmpeg's repacking: the same code values
    bits, shift = SEMI_PLANAR_FORMATS[semi]
    layout = YuvLayout(width, height, bits=bits)
    expected = np.empty(layout.shape, layout.dtype)  # no yuv420p10le to_ndarray before PyAV 18
    frame_to_planes(expected, frame, layout)  # planar already: a plain copy
    buffer = np.full(layout.shape, 0xA5, layout.dtype)
    split_semi_planar(buffer, rows_of(interleaved.planes[0], layout.dtype, height),
                      rows_of(interleaved.planes[1], layout.dtype, height // 2), layout, shift)
    np.testing.assert_array_equal(buffer, expected)


def write_raw_clip(path, frames: list[av.VideoFrame], pix_fmt: str) -> None:
    """Frames stored losslessly as rawvideo of ``pix_fmt`` (decoded back in that format)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("rawvideo", rate=25)
        stream.width, stream.height, stream.pix_fmt = frames[0].width, frames[0].height, pix_fmt
        for index, frame in enumerate(frames):
            converted = frame.reformat(format=pix_fmt)
            converted.pts = index
            for packet in stream.encode(converted):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_an_nv12_file_reads_as_the_same_planes_as_its_yuv420p_twin(rng, tmp_path):
    frames = [random_planes_frame(rng, 64, 48, "yuv420p") for _ in range(3)]
    write_raw_clip(tmp_path / "semi.nut", frames, "nv12")
    write_raw_clip(tmp_path / "planar.nut", frames, "yuv420p")
    semi, planar = FileSource(tmp_path / "semi.nut"), FileSource(tmp_path / "planar.nut")
    try:
        assert semi.planes == planar.planes and semi.planes.pix_fmt == "yuv420p"
        assert not semi.hardware_decoding and "decoded on" not in semi.describe()
        for frame in frames:
            got = np.full(semi.planes.shape, 0xA5, np.uint8)
            twin = np.full(planar.planes.shape, 0x5A, np.uint8)
            assert semi.read_into(got) is not None and planar.read_into(twin) is not None
            np.testing.assert_array_equal(got, frame.to_ndarray().ravel())
            np.testing.assert_array_equal(got, twin)
        assert semi.read_into(got) is None
    finally:
        semi.close()
        planar.close()


def test_an_nv12_file_transcodes_through_planes_like_its_yuv420p_twin(rng, tmp_path):
    frames = [random_planes_frame(rng, 64, 48, "yuv420p") for _ in range(4)]
    outputs = {}
    for pix_fmt in ("nv12", "yuv420p"):
        source, out = tmp_path / f"{pix_fmt}.nut", tmp_path / f"{pix_fmt}-out.mkv"
        write_raw_clip(source, frames, pix_fmt)
        pipeline = streamconv.Pipeline(str(source), ["gaussian:sigma=1"], str(out), backend="cpu",
                                       colour="backend", sink_options={"codec": "ffv1"})
        assert pipeline.planes is not None
        assert pipeline.run().frames == 4
        with av.open(str(out)) as container:
            outputs[pix_fmt] = [f.to_ndarray() for f in container.decode(video=0)]
    assert len(outputs["nv12"]) == 4
    for semi, planar in zip(outputs["nv12"], outputs["yuv420p"]):
        np.testing.assert_array_equal(semi, planar)


def test_an_unknown_hardware_decoder_is_refused_with_the_known_ones(sample_clip):
    with pytest.raises(InputError,
                       match="hardware decoder 'no-such' is not in this FFmpeg build; it has: "):
        FileSource(sample_clip, hwaccel="no-such")


def _gpu_present() -> bool:
    from streamconv.backends import cuda_status

    return cuda_status(0)[0]


@pytest.mark.skipif(_gpu_present(), reason="a GPU is present: cuda decoding starts here")
def test_cuda_decoding_without_a_gpu_is_a_clear_error(sample_clip, cli, tmp_path):
    if "cuda" not in hardware_decoders():
        pytest.skip("this FFmpeg build has no cuda hardware decoding")
    with pytest.raises(InputError,
                       match=r"hardware decoding \(cuda\) could not start for .*sample.mp4.*"
                                         r"leave out --hwaccel to decode in software"):
        FileSource(sample_clip, hwaccel="cuda")
    result = cli("run", str(sample_clip), "-o", str(tmp_path / "out.mp4"), "--hwaccel", "cuda")
    assert result.returncode != 0 and "hardware decoding (cuda) could not start" in result.stderr
    assert not (tmp_path / "out.mp4").exists()


@pytest.mark.parametrize("source", ["test", "webcam"])
def test_hwaccel_is_a_usage_error_for_generated_and_camera_sources(cli, source):
    result = cli("run", source, "--hwaccel", "cuda")
    assert result.returncode == EXIT_USAGE
    assert f"--hwaccel applies to video files and streams, not to '{source}'" in result.stderr
