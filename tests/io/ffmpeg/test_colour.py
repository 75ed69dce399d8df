"""Colour survives a transcode: the input's matrix and range are used both ways, and tagged."""

from __future__ import annotations

import re
import subprocess
import sys

import av
import numpy as np
import pytest

from helpers.cli import REPO
from helpers.clips import write_clip

W, H = 128, 64
# (Y, U, V) patches inside the RGB gamut for every matrix and range tested.
PATCHES = [(100, 110, 150), (150, 140, 120), (60, 128, 128), (200, 120, 135)]


def make_flat_clip(path, space: int, colour_range: int) -> None:
    """Three lossless H.264 frames of four flat YUV patches, tagged with ``space`` and
    ``colour_range``."""
    y = np.zeros((H, W), np.uint8)
    u = np.zeros((H // 2, W // 2), np.uint8)
    v = np.zeros((H // 2, W // 2), np.uint8)
    for k, (yy, uu, vv) in enumerate(PATCHES):
        y[:, 32 * k:32 * (k + 1)], u[:, 16 * k:16 * (k + 1)], v[:, 16 * k:16 * (k + 1)] = yy, uu, vv
    planes = np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(H * 3 // 2, W)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.options = {"qp": "0"}
        stream.codec_context.colorspace, stream.codec_context.color_range = space, colour_range
        for index in range(3):
            frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
            frame.colorspace, frame.color_range, frame.pts = space, colour_range, index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def read_patches(path):
    """(colorspace, color_range) tags and the (Y, U, V) at each patch's centre, first frame."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        tags = (stream.codec_context.colorspace, stream.codec_context.color_range)
        planes = next(container.decode(stream)).to_ndarray()
    luma, chroma = planes[:H], planes[H:].reshape(2, H // 2, W // 2)
    return tags, [(int(luma[10, 32 * k + 16]), int(chroma[0][5, 16 * k + 8]),
                   int(chroma[1][5, 16 * k + 8]))
                  for k in range(4)]


@pytest.mark.parametrize("path, tolerance", [("auto", 0), ("backend", 0), ("host", 2)])
@pytest.mark.parametrize("space, colour_range", [(1, 1), (1, 2), (5, 1), (6, 2), (2, 0)],
                         ids=["bt709-limited", "bt709-full", "bt601-limited", "bt601-full",
                              "untagged"])
def test_identity_transcode_keeps_colours_and_tags(cli, tmp_path, space, colour_range, path,
                                                   tolerance):
    """Through RGB and back with the input's own matrix and range; a mix-up would be 10-20 levels
    off.

    The backend's integer conversion (the default, auto, on every backend) keeps in-gamut colours
    exactly; FFmpeg's scaler, on the host path, within 2 (on flat patches; see
    tests/backends/test_colour_default.py for busy pictures).
    """
    source, out = tmp_path / "flat.mp4", tmp_path / "out.mp4"
    make_flat_clip(source, space, colour_range)
    result = cli("run", str(source), "-o", str(out), "--backend", "cpu", "--crf", "0", "--colour",
                 path, "-q", "--filter", "identity")
    assert result.returncode == 0, result.stderr
    tags_in, patches_in = read_patches(source)
    tags_out, patches_out = read_patches(out)
    assert tags_out == tags_in == (space, colour_range)
    assert patches_in == PATCHES
    worst = max(abs(a - b) for got, want in zip(patches_out, PATCHES) for a, b in zip(got, want))
    assert worst <= tolerance


def first_frame(path) -> av.VideoFrame:
    with av.open(str(path)) as container:
        return next(container.decode(video=0))


def test_tags_say_what_is_written_between_rgb_and_yuv(cli, tmp_path):
    """An RGB output is tagged RGB and a YUV output of RGB input with the matrix it was converted
    with: a YUV matrix on RGB samples makes decoders read them as Y, U, V, an RGB tag on YUV
    samples as G, B, R (both off by up to 100 levels)."""
    from streamconv.frames.colour import frame_to_rgb

    if "libx264rgb" not in av.codecs_available:
        pytest.skip("this PyAV build has no libx264rgb")
    source, rgb_out = tmp_path / "flat.mp4", tmp_path / "rgb.mkv"
    make_flat_clip(source, 1, 1)  # BT.709, limited range
    assert cli("run", str(source), "-o", str(rgb_out), "--codec", "libx264rgb", "--crf", "0",
               "--backend", "cpu", "-q").returncode == 0
    written = first_frame(rgb_out)
    assert (written.format.name, written.colorspace, written.color_range) == ("gbrp", 0, 2)
    np.testing.assert_array_equal(written.to_ndarray(format="rgb24"),
                                  frame_to_rgb(first_frame(source)).to_ndarray())

    # RGB in (tagged RGB, full range), YUV out
    png, yuv_out = tmp_path / "still.png", tmp_path / "yuv.mp4"
    assert cli("run", str(rgb_out), "-o", str(png), "--max-frames", "1", "--backend", "cpu",
               "-q").returncode == 0
    assert first_frame(png).colorspace == 0
    assert cli("run", str(png), "-o", str(yuv_out), "--crf", "0", "--backend", "cpu",
               "-q").returncode == 0
    written = first_frame(yuv_out)
    # BT.601, the matrix it was converted with
    assert (written.colorspace, written.color_range) == (6, 2)
    back = frame_to_rgb(written).to_ndarray().astype(int)
    assert np.abs(back - first_frame(png).to_ndarray(format="rgb24")).max() <= 2


@pytest.mark.parametrize("opaque", [False, True], ids=["transparent", "opaque"])
def test_transparency_dropped_is_said(cli, tmp_path, opaque):
    """The filters see RGB: an input's alpha is not written, which must not pass in silence (and
    an alpha channel that is all opaque, as a GIF's often is, loses nothing)."""
    picture = np.zeros((16, 20, 4), np.uint8)
    picture[..., 0], picture[..., 3] = 100, 255 if opaque else np.arange(20) * 12
    for index in range(1, 3):
        with av.open(str(tmp_path / f"a{index}.png"), "w") as container:
            stream = container.add_stream("png")
            stream.width, stream.height, stream.pix_fmt = 20, 16, "rgba"
            for packet in [*stream.encode(av.VideoFrame.from_ndarray(picture, format="rgba")),
                           *stream.encode(None)]:
                container.mux(packet)
    result = cli("run", str(tmp_path / "a%d.png"), "-o", str(tmp_path / "out.mkv"), "--backend",
                 "cpu", "-q")
    assert result.returncode == 0, result.stderr
    assert ("its transparency (rgba) is dropped" in result.stderr) is not opaque


# Frame sizes whose slices the threaded scaler raced on (libswscale 9, 16 threads): 4 to 14
# distinct results in 20 conversions, each way.
RACED_SIZES = [(200, 200), (176, 144), (400, 300)]
RUN_AS_ON_16_CORES = ("import sys; from streamconv.io.ffmpeg.muxer_options import _libraries; "
                      "_libraries()[1].av_cpu_force_count(16); from streamconv.launch import main; "
                      "sys.exit(main(sys.argv[1:]))")


@pytest.fixture
def sixteen_cores():
    """FFmpeg told the machine has 16 cores (its scaler then cuts a frame into 16 slices on as
    many threads, as on a large host, where the race shows); the true count is restored after."""
    from streamconv.io.ffmpeg.muxer_options import _libraries

    libraries = _libraries()
    if libraries is None:
        pytest.skip("PyAV's libavutil cannot be reached through ctypes here")
    libraries[1].av_cpu_force_count(16)
    yield
    libraries[1].av_cpu_force_count(0)


def _samples(frame: av.VideoFrame) -> bytes:
    """The visible 16-bit samples of every plane of ``frame``, row padding left out (PyAV
    before 18 has no ``to_ndarray`` for 10-bit 4:2:0 and 4:2:2)."""
    return b"".join(np.frombuffer(plane, np.uint8, count=plane.height * plane.line_size)
                    .reshape(plane.height, plane.line_size)[:, :plane.width * 2].tobytes()
                    for plane in frame.planes)


@pytest.mark.parametrize("size", RACED_SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_the_scaler_converts_the_same_frame_alike_every_time(tmp_path, size, sixteen_cores):
    """A decoded 10-bit frame to RGB and back to 4:2:0 and 4:2:2 (the reader and writer of
    ``--colour host`` and of the scaler's fallback formats), 12 times each: one result each.
    The threaded scaler gave the first 8 samples of some rows other values run after run."""
    from streamconv.frames.colour import ColourTags, frame_to_rgb, rgb_to_frame

    clip = write_clip(tmp_path / "ten.mp4", pix_fmt="yuv420p10le", frames=2, size=size)
    with av.open(str(clip)) as container:
        frames = list(container.decode(video=0))
    tags = ColourTags.of(frames[0])
    for frame in frames:
        rgb = {frame_to_rgb(frame, "rgb48le").to_ndarray().tobytes() for _ in range(12)}
        assert len(rgb) == 1
        picture = np.frombuffer(rgb.pop(), np.uint16).reshape(size[1], size[0], 3)
        for pix_fmt in ("yuv420p10le", "yuv422p10le"):
            written = {_samples(rgb_to_frame(picture, pix_fmt, tags)) for _ in range(12)}
            assert len(written) == 1, pix_fmt


@pytest.mark.parametrize("options", [("--colour", "host"), ("--pix-fmt", "yuv422p10le")],
                         ids=["colour-host", "scaler-fallback"])
def test_a_10_bit_run_twice_writes_the_same_bytes(tmp_path, options):
    """The same run twice, on a host of 16 cores as FFmpeg counts them: byte-identical files."""
    clip = write_clip(tmp_path / "ten.mp4", pix_fmt="yuv420p10le", frames=30, size=(200, 200))
    outputs = [tmp_path / f"out{index}.mp4" for index in range(2)]
    for output in outputs:
        result = subprocess.run([sys.executable, "-c", RUN_AS_ON_16_CORES, "run", str(clip), "-o",
                                 str(output), "--backend", "cpu", "-q", *options], cwd=REPO,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
    assert outputs[0].read_bytes() == outputs[1].read_bytes()


def test_every_scaler_conversion_goes_through_the_single_threaded_one():
    """PyAV's ways to convert a frame (reformat, to_ndarray or to_rgb with a format, an image,
    a filter graph) appear in the package only in ``streamconv.frames.colour.convert``."""
    scaling = re.compile(r"\.reformat\(|to_ndarray\(\s*format|\.to_(rgb|image)\(|VideoReformatter\("
                         r"|av\.filter|\bGraph\(")
    found = [(path.relative_to(REPO).as_posix(), line.strip())
             for path in sorted((REPO / "streamconv").rglob("*.py"))
             for line in path.read_text(encoding="utf-8").splitlines() if scaling.search(line)]
    assert found == [("streamconv/frames/colour.py",
                      "scaler = _scalers.scaler = VideoReformatter()"),
                     ("streamconv/frames/colour.py",
                      "return scaler.reformat(frame, threads=1, **reformat)")]
