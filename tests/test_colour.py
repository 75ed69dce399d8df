"""Colour survives a transcode: the input's matrix and range are used both ways, and tagged."""

from __future__ import annotations

import av
import numpy as np
import pytest

W, H = 128, 64
# (Y, U, V) patches inside the RGB gamut for every matrix and range tested.
PATCHES = [(100, 110, 150), (150, 140, 120), (60, 128, 128), (200, 120, 135)]


def make_flat_clip(path, space: int, colour_range: int) -> None:
    """Three lossless H.264 frames of four flat YUV patches, tagged with ``space`` and ``colour_range``."""
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
    return tags, [(int(luma[10, 32 * k + 16]), int(chroma[0][5, 16 * k + 8]), int(chroma[1][5, 16 * k + 8]))
                  for k in range(4)]


@pytest.mark.parametrize("path, tolerance", [("auto", 0), ("backend", 0), ("host", 2)])
@pytest.mark.parametrize("space, colour_range", [(1, 1), (1, 2), (5, 1), (6, 2), (2, 0)],
                         ids=["bt709-limited", "bt709-full", "bt601-limited", "bt601-full", "untagged"])
def test_identity_transcode_keeps_colours_and_tags(cli, tmp_path, space, colour_range, path, tolerance):
    """Through RGB and back with the input's own matrix and range; a mix-up would be 10-20 levels off.

    The backend's integer conversion (the default, auto, on every backend) keeps in-gamut colours
    exactly; FFmpeg's scaler, on the host path, within 2 (on flat patches; see
    tests/test_colour_default.py for busy pictures).
    """
    source, out = tmp_path / "flat.mp4", tmp_path / "out.mp4"
    make_flat_clip(source, space, colour_range)
    result = cli("run", str(source), "-o", str(out), "--backend", "cpu", "--crf", "0", "--colour", path, "-q",
                 "-f", "identity")
    assert result.returncode == 0, result.stderr
    tags_in, patches_in = read_patches(source)
    tags_out, patches_out = read_patches(out)
    assert tags_out == tags_in == (space, colour_range)
    assert patches_in == PATCHES
    worst = max(abs(a - b) for got, want in zip(patches_out, PATCHES) for a, b in zip(got, want))
    assert worst <= tolerance
