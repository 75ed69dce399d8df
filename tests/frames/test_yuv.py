"""The yuv420p path: the fixed-point colour conversion, the planes layout, and pipelines that use
it."""

from __future__ import annotations

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend, convert_colour
from streamconv.frames.colour import ColourTags, frame_to_rgb
from streamconv.chain.filters import parse_chain
from streamconv.io.sinks.sink import CallbackSink, NullSink
from streamconv.frames.yuv import YuvLayout, conversion_coefficients, rgb_to_yuv, yuv_to_rgb

from helpers.clips import write_clip
from helpers.yuv import make_clip

# (AVColorSpace, full range) cases: BT.709, BT.601 (both numbers FFmpeg uses), BT.2020, untagged.
CASES = [(1, False), (1, True), (5, False), (6, True), (9, False), (2, False)]
CASE_IDS = ["bt709-limited", "bt709-full", "bt601-limited", "bt601-full", "bt2020-limited",
            "untagged"]
WEIGHTS = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114), 9: (0.2627, 0.0593),
           2: (0.299, 0.114)}


def layout_for(width: int, height: int, space: int, full: bool, bits: int = 8) -> YuvLayout:
    return YuvLayout(width, height, ColourTags(space, 2 if full else 1), full, bits)


def random_planes(rng, layout: YuvLayout) -> np.ndarray:
    return rng.integers(0, 1 << layout.bits, layout.shape, dtype=layout.dtype)


def _ranges(full: bool, bits: int) -> tuple[int, int, int, int, int]:
    """(Y0, Y span, chroma span, zero chroma, RGB maximum) of the code values at ``bits``."""
    scale = 1 << (bits - 8)
    spans = (0, (1 << bits) - 1, (1 << bits) - 1) if full else (16 * scale, 219 * scale,
                                                                224 * scale)
    return (*spans, 1 << (bits - 1), 255 if bits == 8 else 65535)


def reference_to_rgb(luma, u, v, space: int, full: bool, bits: int = 8) -> np.ndarray:
    """The textbook float64 formulas, for comparison with the fixed-point conversion."""
    kr, kb = WEIGHTS[space]
    kg = 1 - kr - kb
    y0, y_span, c_span, mid, top = _ranges(full, bits)
    y = (luma - y0) * top / y_span
    cb, cr = (u - mid) * top / c_span, (v - mid) * top / c_span
    rgb = np.stack([y + 2 * (1 - kr) * cr,
                    y - 2 * (1 - kb) * kb / kg * cb - 2 * (1 - kr) * kr / kg * cr,
                    y + 2 * (1 - kb) * cb], axis=-1)
    return np.clip(np.floor(rgb + 0.5), 0, top)


@pytest.mark.parametrize("bits", [8, 10, 12])
@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_to_rgb_matches_the_float_formulas_within_one_lsb(rng, space, full, bits):
    layout = layout_for(64, 32, space, full, bits)
    planes = random_planes(rng, layout)
    rgb = np.full(layout.frame_shape, 0xA5, layout.frame_dtype)
    yuv_to_rgb(rgb, planes, layout)
    luma, u, v = (p.astype(np.float64) for p in layout.planes(planes))
    nearest = lambda c: c.repeat(2, 0).repeat(2, 1)  # noqa: E731  (each chroma sample covers 2 x 2)
    expected = reference_to_rgb(luma, nearest(u), nearest(v), space, full, bits)
    assert np.abs(rgb.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_to_rgb_is_close_to_ffmpegs_scaler(rng, space, full):
    """A wrong matrix or range would differ by 10-40 levels; FFmpeg's scaler rounds its own way."""
    layout = layout_for(64, 32, space, full)
    planes = rng.integers(16, 236, layout.shape, dtype=np.uint8)
    planes[layout.width * layout.height:] = rng.integers(120, 136,
                                                         layout.size - layout.width * layout.height)
    ours = np.empty(layout.frame_shape, np.uint8)
    yuv_to_rgb(ours, planes, layout)
    frame = av.VideoFrame.from_ndarray(planes.reshape(layout.height * 3 // 2, layout.width),
                                       format="yuv420p")
    frame.colorspace, frame.color_range = space, 2 if full else 1
    theirs = frame_to_rgb(frame).to_ndarray()
    assert np.abs(ours.astype(int) - theirs).max() <= 3


@pytest.mark.parametrize("bits", [8, 10, 12])
@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_every_in_gamut_flat_colour_round_trips_exactly(space, full, bits):
    """YUV -> RGB -> YUV for a grid of all YUV triples: those inside the RGB gamut come back
    unchanged
    (10- and 12-bit video through 16-bit RGB as 8-bit video through 8-bit RGB)."""
    values = np.arange(0, 1 << bits, 5 << (bits - 8))
    y, u, v = (a.ravel() for a in np.meshgrid(values, values, values, indexing="ij"))
    layout = layout_for(2 * len(y), 2, space, full, bits)
    planes = np.empty(layout.shape, layout.dtype)
    luma, u_plane, v_plane = layout.planes(planes)
    luma[:] = np.repeat(y, 2)
    u_plane[0], v_plane[0] = u, v
    rgb = np.empty(layout.frame_shape, layout.frame_dtype)
    yuv_to_rgb(rgb, planes, layout)
    back = np.empty_like(planes)
    rgb_to_yuv(back, rgb, layout)
    back_y, back_u, back_v = layout.planes(back)
    exact_rgb = reference_to_rgb(y.astype(float), u.astype(float), v.astype(float), space, full,
                                 bits)
    in_gamut = _in_gamut(y, u, v, space, full, bits)
    assert in_gamut.sum() > 10_000  # the RGB cube fills about a sixth of the YUV cube
    assert np.array_equal(back_y[0, ::2][in_gamut], y[in_gamut])
    assert np.array_equal(back_u[0][in_gamut], u[in_gamut])
    assert np.array_equal(back_v[0][in_gamut], v[in_gamut])
    assert np.abs(rgb[0, ::2].astype(int) - exact_rgb).max() <= 1


def _in_gamut(y, u, v, space: int, full: bool, bits: int = 8) -> np.ndarray:
    """Triples whose exact RGB lies inside 0..RGB max (with a half-level margin) and, for limited
    range, whose codes are inside the legal ranges."""
    kr, kb = WEIGHTS[space]
    kg = 1 - kr - kb
    y0, y_span, c_span, mid, top = _ranges(full, bits)
    yy = (y - y0) * top / y_span
    cb, cr = (u - mid) * top / c_span, (v - mid) * top / c_span
    channels = [yy + 2 * (1 - kr) * cr,
                yy - 2 * (1 - kb) * kb / kg * cb - 2 * (1 - kr) * kr / kg * cr,
                yy + 2 * (1 - kb) * cb]
    inside = np.all([(c >= 0.5) & (c <= top - 0.5) for c in channels], axis=0)
    if not full:
        inside &= (y >= y0) & (y <= y0 + y_span) & (u >= mid - c_span // 2) & (
            u <= mid + c_span // 2)
        inside &= (v >= mid - c_span // 2) & (v <= mid + c_span // 2)
    return inside


@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_white_black_and_greys_are_exact(space, full):
    c = conversion_coefficients(space, full)
    assert c["YR"] + c["YG"] + c["YB"] == round(65536 * (255 if full else 219) / 255)
    assert c["UR"] + c["UG"] + c["UB"] == 0 and c["VR"] + c["VG"] + c["VB"] == 0
    layout = layout_for(2, 2, space, full)
    for grey in (0, 1, 77, 128, 254, 255):
        rgb = np.full(layout.frame_shape, grey, np.uint8)
        planes = np.empty(layout.shape, np.uint8)
        rgb_to_yuv(planes, rgb, layout)
        luma, u, v = layout.planes(planes)
        assert u.item() == v.item() == 128
        back = np.empty_like(rgb)
        yuv_to_rgb(back, planes, layout)
        assert np.array_equal(back, rgb), grey


@pytest.mark.parametrize("bits", [10, 12])
@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_deep_white_black_and_greys_keep_neutral_chroma(space, full, bits):
    c = conversion_coefficients(space, full, bits)
    y0, y_span, _, mid, _ = _ranges(full, bits)
    assert c["YR"] + c["YG"] + c["YB"] == round(2 ** c["TO_YUV_BITS"] * y_span / 65535)
    assert c["UR"] + c["UG"] + c["UB"] == 0 and c["VR"] + c["VG"] + c["VB"] == 0
    layout = layout_for(2, 2, space, full, bits)
    for code in (y0, y0 + 1, y0 + 300, y0 + y_span - 1, y0 + y_span):  # black, greys, white
        planes = np.array([code] * 4 + [mid, mid], np.uint16)
        rgb = np.empty(layout.frame_shape, np.uint16)
        yuv_to_rgb(rgb, planes, layout)
        assert len(np.unique(rgb)) == 1  # neutral
        back = np.empty_like(planes)
        rgb_to_yuv(back, rgb, layout)
        assert back.tolist() == planes.tolist(), code


def test_chroma_is_the_mean_of_each_two_by_two_block():
    layout = layout_for(4, 2, 5, True)
    rgb = np.zeros(layout.frame_shape, np.uint8)
    rgb[:, :2, 2] = [[255, 255], [0, 0]]  # left block: blue in half its pixels
    planes = np.empty(layout.shape, np.uint8)
    rgb_to_yuv(planes, rgb, layout)
    _, u, v = layout.planes(planes)
    # Cb of full blue is 128 + 127.5; half the block blue -> 128 + 63.75 -> 192; the right block is
    # black.
    assert u.tolist() == [[192, 128]]
    assert v[0, 1] == 128


def test_layout_views_and_errors():
    layout = YuvLayout(6, 4)
    buffer = np.arange(layout.size, dtype=np.uint8)
    luma, u, v = layout.planes(buffer)
    assert (luma.shape, u.shape, v.shape) == ((4, 6), (2, 3), (2, 3))
    assert luma[3, 5] == 23 and u[0, 0] == 24 and v[0, 0] == 30
    assert np.shares_memory(luma, buffer) and np.shares_memory(v, buffer)
    with pytest.raises(ValueError, match="even sizes"):
        YuvLayout(5, 4)
    with pytest.raises(ValueError, match=r"uint8\(36,\)"):
        layout.planes(np.zeros(35, np.uint8))
    deep = YuvLayout.of_stream(6, 4, "yuv420p10le", ColourTags())
    assert (deep.bits, deep.dtype, deep.nbytes, deep.pix_fmt) == (10, np.uint16, 72, "yuv420p10le")
    assert YuvLayout.of_stream(6, 4, "yuv422p10le", ColourTags()) is None
    with pytest.raises(ValueError, match=r"uint16\(36,\)"):
        deep.planes(np.zeros(36, np.uint8))
    assert YuvLayout.of_stream(7, 4, "yuv420p", ColourTags()) is None
    assert YuvLayout.of_stream(6, 4, "yuvj420p", ColourTags()).full_range
    assert not YuvLayout.of_stream(6, 4, "yuv420p", ColourTags()).full_range


def integer_to_rgb(planes: np.ndarray, layout: YuvLayout) -> np.ndarray:
    """The module docstring's fixed-point YUV -> RGB, written out plainly in 64-bit integers."""
    c = layout.coefficients
    luma, u, v = (p.astype(np.int64) for p in layout.planes(planes))
    u, v = (p.repeat(2, 0).repeat(2, 1) - c["CMID"] for p in (u, v))
    base = c["CY"] * (luma - c["Y0"]) + (1 << (c["TO_RGB_BITS"] - 1))
    terms = (c["CRV"] * v, -(c["CGU"] * u + c["CGV"] * v), c["CBU"] * u)
    return np.stack([np.clip((base + t) >> c["TO_RGB_BITS"], 0, c["RGB_MAX"]) for t in terms], -1)


def integer_to_planes(rgb: np.ndarray, layout: YuvLayout) -> np.ndarray:
    """The module docstring's fixed-point RGB -> YUV, written out plainly in 64-bit integers."""
    c, shift = layout.coefficients, layout.coefficients["TO_YUV_BITS"]
    red, green, blue = (rgb[..., k].astype(np.int64) for k in range(3))
    luma = (c["YR"] * red + c["YG"] * green + c["YB"] * blue + (c["Y0"] << shift)
            + (1 << (shift - 1))) >> shift
    height, width = layout.height, layout.width
    block = [p.reshape(height // 2, 2, width // 2, 2).sum(axis=(1, 3)) for p in (red, green, blue)]
    chroma = [((c[n + "R"] * block[0] + c[n + "G"] * block[1] + c[n + "B"] * block[2]
                + (1 << (shift + 1))) >> (shift + 2)) + c["CMID"] for n in "UV"]
    return np.concatenate([np.clip(p, 0, c["CODE_MAX"]).ravel() for p in (luma, *chroma)])


@pytest.mark.parametrize("bits", [8, 10, 12])
@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
def test_conversion_is_the_integer_formulas_exactly(rng, space, full, bits):
    layout = layout_for(38, 22, space, full, bits)  # an odd number of chroma columns
    planes = random_planes(rng, layout)
    rgb = np.full(layout.frame_shape, 0xA5, layout.frame_dtype)
    yuv_to_rgb(rgb, planes, layout)
    np.testing.assert_array_equal(rgb, integer_to_rgb(planes, layout))
    rgb = rng.integers(0, np.iinfo(layout.frame_dtype).max + 1, layout.frame_shape,
                       dtype=layout.frame_dtype)
    back = np.full_like(planes, 0xA5)
    rgb_to_yuv(back, rgb, layout)
    np.testing.assert_array_equal(back, integer_to_planes(rgb, layout))


def test_banded_conversion_equals_the_whole_frame(rng):
    """The CPU backend converts in bands of rows on threads; the bytes must not change."""
    # more rows than one band, an odd number of chroma columns
    layout = layout_for(130, 202, 1, False)
    planes = random_planes(rng, layout)
    whole, banded = np.empty(layout.frame_shape, np.uint8), np.full(layout.frame_shape, 0xA5,
                                                                    np.uint8)
    yuv_to_rgb(whole, planes, layout)
    convert_colour(banded, planes, layout, to_rgb=True)
    np.testing.assert_array_equal(banded, whole)
    back_whole, back_banded = np.empty_like(planes), np.full_like(planes, 0xA5)
    rgb_to_yuv(back_whole, whole, layout)
    convert_colour(whole, back_banded, layout, to_rgb=False)
    np.testing.assert_array_equal(back_banded, back_whole)


def test_cpu_backend_planes_slot_is_convert_filter_convert(rng):
    layout = layout_for(66, 34, 1, False)
    chain = parse_chain(["gaussian:sigma=1.5", "sharpen"])
    backend = CpuBackend(chain)
    slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
    assert slot.host_in.shape == layout.shape and slot.frame_shape == layout.frame_shape
    slot.host_in[:] = random_planes(rng, layout)
    slot.host_out.fill(0xA5)
    backend.submit(slot)
    rgb = np.empty(layout.frame_shape, np.uint8)
    yuv_to_rgb(rgb, slot.host_in, layout)
    expected = np.empty(layout.shape, np.uint8)
    rgb_to_yuv(expected, CpuBackend(chain).apply(rgb), layout)
    np.testing.assert_array_equal(slot.host_out, expected)


def test_no_filters_pass_the_planes_through_unchanged(rng):
    layout = YuvLayout(8, 6)
    backend = CpuBackend([])
    slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
    slot.host_in[:] = random_planes(rng, layout)
    backend.submit(slot)
    np.testing.assert_array_equal(slot.host_out, slot.host_in)


def decoded_planes(path) -> tuple[list[np.ndarray], list[int], tuple[int, int]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        tags = (stream.codec_context.colorspace, stream.codec_context.color_range)
    return [f.to_ndarray().ravel() for f in frames], [float(f.pts * f.time_base)
                                                      for f in frames], tags


@pytest.mark.parametrize("space, colour_range", [(1, 1), (5, 2)],
                         ids=["bt709-limited", "bt601-full"])
def test_transcode_through_planes_equals_the_reference(tmp_path, space, colour_range):
    source, out = tmp_path / "in.mp4", tmp_path / "out.mp4"
    written = make_clip(source, 64, 48, 4, space=space, colour_range=colour_range)
    pipeline = streamconv.Pipeline(str(source), ["box:size=3"], str(out), backend="cpu",
                                   colour="backend",
                                   sink_options={"options": {"qp": "0"}, "preset": "ultrafast"})
    assert pipeline.planes is not None and pipeline.planes.full_range == (colour_range == 2)
    assert pipeline.run().frames == 4
    got, times, tags = decoded_planes(out)
    assert tags == (space, colour_range)
    assert times == decoded_planes(source)[1] == [0.04, 0.16, 0.28, 0.4]
    layout = pipeline.planes
    backend = CpuBackend(parse_chain(["box:size=3"]))
    for planes_in, planes_out in zip(written, got):
        rgb = np.empty(layout.frame_shape, np.uint8)
        yuv_to_rgb(rgb, planes_in, layout)
        expected = np.empty(layout.shape, np.uint8)
        rgb_to_yuv(expected, backend.apply(rgb), layout)
        np.testing.assert_array_equal(planes_out, expected)


def test_rgb_path_where_planes_cannot_go(tmp_path):
    source = tmp_path / "in.mp4"
    make_clip(source, 64, 48, 2)
    with streamconv.Pipeline(str(source), ["edge"], None, backend="cpu",
                             colour="backend") as backend_colour:
        assert backend_colour.planes is not None
    with streamconv.Pipeline(str(source), ["edge"], None, backend="cpu",
                             colour="host") as host_colour:
        assert host_colour.planes is None
    with streamconv.Pipeline(str(source), ["edge"], None, backend="cpu") as auto_colour:
        assert auto_colour.planes == backend_colour.planes  # auto: the planes on the cpu too
    wide = write_clip(tmp_path / "444.mkv", "ffv1", "yuv444p", frames=2, size=(64, 48))
    with streamconv.Pipeline(str(wide), ["edge"], None, backend="cpu") as auto_444:
        assert auto_444.source.planes is None and auto_444.planes is None  # 4:4:4 needs the scaler
    with pytest.raises(ValueError, match="unknown colour path 'gpu'; known: auto, backend, host"):
        streamconv.Pipeline(str(source), ["edge"], None, backend="cpu", colour="gpu")
    seen = []
    callback = streamconv.Pipeline(str(source), ["edge"],
                                   CallbackSink(lambda f, m: seen.append(f.shape)),
                                   backend="cpu", colour="backend")
    assert callback.planes is None
    callback.run()
    assert seen == [(48, 64, 3)] * 2
    with_on_frame = streamconv.Pipeline(str(source), [], NullSink(), backend="cpu",
                                        colour="backend", on_frame=lambda f, m: None)
    assert with_on_frame.planes is None
    rgb_out = streamconv.Pipeline(str(source), [], str(tmp_path / "o.mkv"), backend="cpu",
                                  colour="backend",
                                  sink_options={"codec": "ffv1", "pix_fmt": "bgr0"})
    assert rgb_out.planes is None
    for pipeline in (with_on_frame, rgb_out):
        pipeline.run()


def test_odd_sized_input_takes_the_rgb_path(tmp_path):
    odd = tmp_path / "odd.mkv"
    with av.open(str(odd), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 33, 17, "yuv420p"
        for index in range(2):
            frame = av.VideoFrame.from_ndarray(np.zeros((17, 33, 3), np.uint8),
                                               format="rgb24").reformat(
                format="yuv420p")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    with streamconv.FileSource(odd) as video:
        assert video.planes is None
