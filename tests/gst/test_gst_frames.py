"""The element's frame handling that needs no GStreamer (every Python): formats and colorimetry,
frames copied between GStreamer's buffer layouts and the slots, the ``filter`` property's chains,
the ring of slots on the cpu backend, and ``streamconv gst-path``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import streamconv
from streamconv.embed.filter import make_engine
from streamconv.gst.buffers import FrameGeometry, frame_planes, read_frame, write_frame
from streamconv.gst.cuda_memory import device_frame, mapped_address
from streamconv.gst.engine import HostRing, added_latency, frames_in_flight
from streamconv.gst.formats import FORMATS, colour_tags, frame_format
from streamconv.gst.settings import Settings, parse_filter_chain
from streamconv.interop.raw import raw_device_array
from streamconv.frames.colour import ColourTags
from streamconv.frames.yuv import YuvLayout, rgb_to_yuv, yuv_to_rgb

# GstVideoInfo's layouts of 98x50 frames (GStreamer 1.22): offsets and strides in bytes.
GEOMETRIES = {
    "I420": FrameGeometry(98, 50, (0, 5000, 6300), (100, 52, 52)),
    "NV12": FrameGeometry(98, 50, (0, 5000), (100, 100)),
    "P010_10LE": FrameGeometry(98, 50, (0, 9800), (196, 196)),
    "I420_10LE": FrameGeometry(98, 50, (0, 9800, 12300), (196, 100, 100)),
}
SIZES = {"I420": 7600, "NV12": 7500, "P010_10LE": 14700, "I420_10LE": 14800}


def _buffer(rng: np.random.Generator, size: int) -> bytearray:
    return bytearray(rng.integers(0, 256, size, np.uint8).tobytes())


def test_a_packed_frame_is_read_and_written_within_its_padded_rows(rng):
    fmt = frame_format("RGB")
    geometry = FrameGeometry(97, 5, (0,), (292,))  # 97 x 3 = 291 bytes a row, padded to 292
    data = _buffer(rng, 292 * 5)
    original = bytes(data)
    rows = np.frombuffer(original, np.uint8).reshape(5, 292)
    target = np.empty((5, 97, 3), np.uint8)
    read_frame(target, memoryview(data), fmt, geometry, None)
    assert np.array_equal(target, rows[:, :291].reshape(5, 97, 3))
    frame = rng.integers(0, 256, (5, 97, 3), np.uint8)
    write_frame(memoryview(data), frame, fmt, geometry, None)
    written = np.frombuffer(bytes(data), np.uint8).reshape(5, 292)
    assert np.array_equal(written[:, :291].reshape(5, 97, 3), frame)
    assert np.array_equal(written[:, 291], rows[:, 291])  # the padding is left alone


@pytest.mark.parametrize("name", ["I420", "I420_10LE", "NV12", "P010_10LE"])
def test_planes_go_into_the_slot_layout_and_back(rng, name):
    fmt, geometry = FORMATS[name], GEOMETRIES[name]
    data = _buffer(rng, SIZES[name])
    planes = frame_planes(memoryview(data), fmt, geometry)
    for plane in planes:  # valid samples: 10 bits, and P010's in the high bits
        plane[...] = rng.integers(0, 1 << fmt.bits, plane.shape) << fmt.shift
    layout = YuvLayout(98, 50, bits=fmt.bits)
    slot = np.full(layout.shape, 7, layout.dtype)
    read_frame(slot, memoryview(data), fmt, geometry, layout)
    y_plane, u_plane, v_plane = layout.planes(slot)
    if fmt.kind == "planar":
        expected = planes
    else:
        expected = [planes[0], planes[1][:, 0::2], planes[1][:, 1::2]]
    for got, want in zip((y_plane, u_plane, v_plane), expected):
        assert np.array_equal(got, want >> fmt.shift)
    before = bytes(data)
    for plane in planes:
        plane[...] = 0
    write_frame(memoryview(data), slot, fmt, geometry, layout)
    assert bytes(data) == before  # every sample back, interleaved and shifted; padding untouched


def test_a_buffer_too_small_for_its_frame_is_refused():
    with pytest.raises(streamconv.FrameFormatError, match="too small"):
        read_frame(
            np.empty((50, 98, 3), np.uint8),
            memoryview(bytearray(1000)),
            FORMATS["RGB"],
            FrameGeometry(98, 50, (0,), (296,)),
            None,
        )


def test_odd_sized_planes_and_unknown_formats_are_refused():
    with pytest.raises(streamconv.FrameFormatError, match="even width and height"):
        FORMATS["I420"].layout(97, 50, ColourTags())
    with pytest.raises(streamconv.FrameFormatError, match="YUY2"):
        frame_format("YUY2")
    with pytest.raises(streamconv.FrameFormatError, match="CUDA memory"):
        frame_format("NV12", device=True)


def test_colorimetry_becomes_ffmpegs_numbers():
    assert colour_tags(3, 2) == ColourTags(space=1, range=1)  # BT.709, limited
    assert colour_tags(4, 1) == ColourTags(space=6, range=2)  # BT.601, full
    assert colour_tags(6, 2).space == 9  # BT.2020
    assert colour_tags(0, 0) == ColourTags()  # unknown: unspecified, read as BT.601 limited


def test_a_filter_string_names_specs_and_presets(tmp_path):
    chain = parse_filter_chain(" preset:edge -> box:size=3 -> custom:taps=0,1,0;1,-4,1;0,1,0 ")
    assert [stage.name for stage in chain.stages] == ["gaussian", "edge", "box", "custom"]
    assert chain.border is None
    assert parse_filter_chain("").stages == ()
    with pytest.raises(streamconv.FilterSpecError, match="empty stage"):
        parse_filter_chain("box -> -> edge")
    with pytest.raises(streamconv.FilterSpecError, match="unknown filter"):
        parse_filter_chain("box -> nosuch")
    zero = tmp_path / "zero.toml"
    zero.write_text('border = "zero"\n[[filter]]\nname = "box"\n')
    with pytest.raises(streamconv.FilterSpecError, match="different borders"):
        parse_filter_chain(f"preset:emboss -> preset:{zero}")


def test_the_border_property_wins_over_a_presets_border():
    settings = Settings()
    settings.set("filter", "preset:emboss")
    assert settings.resolve()[1] == "replicate"
    settings.set("border", "zero")
    assert settings.resolve()[1] == "zero"
    settings.set("ring-depth", 0)
    with pytest.raises(streamconv.SettingsError, match="ring-depth"):
        settings.resolve()


def test_only_the_cuda_backend_keeps_frames_in_flight():
    assert frames_in_flight("cuda", 4) == 4
    assert frames_in_flight("cpu", 4) == 1
    assert added_latency(3, 33_333_333) == 66_666_666
    assert added_latency(1, 33_333_333) == 0
    assert added_latency(3, None) == 0


def test_the_ring_filters_i420_as_the_cpu_backend_filters_planes(rng):
    """Frames through the ring equal the conversion, the API's Filter and the conversion back."""
    stages, border, name, backend = make_engine(
        "gaussian:sigma=1.2", border="reflect101", backend="cpu", device=0, kernel="auto"
    )
    stats = streamconv.RunStats()
    ring: HostRing[int] = HostRing(backend, frames_in_flight(name, 3), stats)
    fmt, geometry = FORMATS["I420"], GEOMETRIES["I420"]
    colour = ColourTags(space=1, range=1)
    ring.configure(fmt, geometry, colour)
    layout = fmt.layout(98, 50, colour)
    reference = streamconv.Filter(stages, border=border, backend="cpu")
    for number in range(3):
        data = _buffer(rng, SIZES["I420"])
        flat = np.empty(layout.shape, layout.dtype)
        read_frame(flat, memoryview(data), fmt, geometry, layout)
        rgb = np.empty(layout.frame_shape, np.uint8)
        yuv_to_rgb(rgb, flat, layout)
        expected = np.empty_like(flat)
        rgb_to_yuv(expected, reference(rgb), layout)
        ring.submit(memoryview(data), number)
        slot, held = ring.take()
        assert ring.take() is None
        out = bytearray(len(data))
        assert ring.write_out(slot, held, memoryview(out)) == number
        got = np.empty_like(flat)
        read_frame(got, memoryview(out), fmt, geometry, layout)
        assert np.array_equal(got, expected)
    assert stats.frames == 3 and set(stats.stages) >= {"read", "kernel", "write", "latency"}
    ring.close()


def test_a_device_frame_is_described_as_the_gpu_array_path_reads_it():
    """The view of mapped CUDA memory handed to streamconv.Filter: its first plane's offset and
    pitch, read back through streamconv's own __cuda_array_interface__ reader."""
    geometry = FrameGeometry(98, 50, (256,), (512,))  # a pitched allocation
    described = raw_device_array(device_frame(0x7F00_0000_0000, FORMATS["RGBA"], geometry))
    assert (described.address, described.shape) == (0x7F00_0000_0100, (50, 98, 4))
    assert described.strides == (512, 4, 1) and described.dtype == np.uint8
    grey = raw_device_array(device_frame(0x7F00_0000_0000, FORMATS["GRAY16_LE"], geometry))
    assert grey.shape == (50, 98) and grey.strides == (512, 2) and grey.dtype == np.uint16


def test_a_mappings_address_is_taken_without_reading_it():
    data = bytearray(64)
    view = memoryview(data)[16:]
    assert mapped_address(view) == np.frombuffer(data, np.uint8).ctypes.data + 16


def test_gst_path_prints_the_folder_that_registers_the_element(cli):
    result = cli("gst-path")
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip())
    assert folder == Path(streamconv.__file__).parent / "gst" / "plugin"
    assert (folder / "python" / "gststreamconv.py").is_file()
