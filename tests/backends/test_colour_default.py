"""The default colour path on the CPU backend: the planes, converted by the backend as on the GPU,
so an identity transcode gives back every sample the RGB cube holds; ``--colour host`` still
selects FFmpeg's scaler, which does not."""

from __future__ import annotations

import av
import numpy as np
import pytest

from streamconv.frames.colour import ColourTags
from streamconv.frames.gamut import unclipped_blocks, unclipped_pixels
from streamconv.frames.yuv import YuvLayout, frame_to_planes, planes_to_frame

W, H = 96, 64
FORMATS = {8: "yuv420p", 10: "yuv420p10le"}


def busy_planes(layout: YuvLayout, seed: int) -> np.ndarray:
    """(1.5 W H,) planes of smooth ramps over the code range with noise on every sample: most
    pixels inside the RGB cube, some (saturated corners, noisy edges) outside it."""
    rng = np.random.default_rng(seed)
    scale, top = 1 << (layout.bits - 8), (1 << layout.bits) - 1
    planes = np.empty(layout.shape, layout.dtype)
    for number, plane in enumerate(layout.planes(planes)):
        rows, columns = plane.shape
        ramp = np.add.outer(np.linspace(0, 1, rows), np.linspace(0, 1, columns)) / 2
        if number == 0:
            values = (40 + 170 * ramp) * scale  # luma across most of its range
        else:
            # chroma both ways of grey
            values = (128 + (60 if number == 1 else -60) * (ramp - 0.5)) * scale
        noise = rng.integers(-12, 13, plane.shape) * scale
        plane[...] = np.clip(np.rint(values) + noise, 0, top)
    return planes


def write_clip(path, layout: YuvLayout, frames: int = 3) -> list[np.ndarray]:
    """A lossless clip (x264 qp 0) of busy planes, tagged with the layout's matrix and range."""
    written = [busy_planes(layout, seed) for seed in range(frames)]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25, options={"qp": "0"})
        stream.width, stream.height, stream.pix_fmt = W, H, layout.pix_fmt
        stream.codec_context.colorspace, stream.codec_context.color_range = layout.colour.space, layout.colour.range
        for index, planes in enumerate(written):
            frame = planes_to_frame(planes, layout, layout.pix_fmt, layout.colour)
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return written


def read_clip(path, layout: YuvLayout) -> list[np.ndarray]:
    """Every frame's planes, after checking the file's format and tags."""
    frames = []
    with av.open(str(path)) as container:
        context = container.streams.video[0].codec_context
        assert context.pix_fmt == layout.pix_fmt
        assert (int(context.colorspace), int(context.color_range)) == (layout.colour.space,
                                                                       layout.colour.range)
        for frame in container.decode(video=0):
            planes = np.empty(layout.shape, layout.dtype)
            frame_to_planes(planes, frame, layout)
            frames.append(planes)
    return frames


def compare(written: list[np.ndarray], read: list[np.ndarray], layout: YuvLayout) -> dict[str, int]:
    """Counts of samples inside the cube (per the pixels their conversion reads), of those
    changed, and of samples outside it and those changed; the largest change outside."""
    counts = dict.fromkeys(("inside", "inside_changed", "outside", "outside_changed",
                            "outside_max"), 0)
    assert len(read) == len(written)
    for before, after in zip(written, read):
        pixels = unclipped_pixels(before, layout)
        for number, (old, new) in enumerate(zip(layout.planes(before), layout.planes(after))):
            inside = pixels if number == 0 else unclipped_blocks(pixels)
            moved = np.abs(old.astype(np.int64) - new)
            counts["inside"] += int(inside.sum())
            counts["inside_changed"] += int((moved[inside] > 0).sum())
            counts["outside"] += int((~inside).sum())
            counts["outside_changed"] += int((moved[~inside] > 0).sum())
            counts["outside_max"] = max(counts["outside_max"], int(moved[~inside].max(initial=0)))
    return counts


@pytest.mark.parametrize("bits", [8, 10])
@pytest.mark.parametrize("space, colour_range", [(1, 1), (1, 2), (5, 1)],
                         ids=["bt709-limited", "bt709-full", "bt601-limited"])
def test_identity_with_the_cpu_default_gives_back_every_in_gamut_sample(cli, tmp_path, bits, space,
                                                                        colour_range):
    """From the CLI, no --colour: the planes path, every sample inside the RGB cube exactly; those
    outside are clipped to it (the filters see RGB of the frame's depth)."""
    layout = YuvLayout(W, H, ColourTags(space, colour_range), colour_range == 2, bits)
    source, output = tmp_path / "in.mkv", tmp_path / "out.mkv"
    written = write_clip(source, layout)
    result = cli("run", str(source), "-o", str(output), "--backend", "cpu", "--codec", "ffv1",
                 "-v", "--filter", "identity")
    assert result.returncode == 0, result.stderr
    assert f"colour: {layout.describe()} planes, converted by the backend" in result.stderr
    counts = compare(written, read_clip(output, layout), layout)
    total = counts["inside"] + counts["outside"]
    # both kinds well present
    assert counts["inside"] > total / 2 and counts["outside"] > total / 50
    assert counts["inside_changed"] == 0
    assert counts["outside_changed"] > 0  # clipped: what lies outside the cube is lost


@pytest.mark.parametrize("bits", [8, 10])
def test_colour_host_still_selects_the_scaler(cli, tmp_path, bits):
    """--colour host: RGB slots, FFmpeg's scaler both ways, which moves in-gamut samples too (its
    chroma is interpolated, not the 2 x 2 block's own)."""
    layout = YuvLayout(W, H, ColourTags(1, 1), False, bits)
    source, output = tmp_path / "in.mkv", tmp_path / "out.mkv"
    written = write_clip(source, layout)
    result = cli("run", str(source), "-o", str(output), "--backend", "cpu", "--codec", "ffv1", "-v",
                 "--colour", "host", "--filter", "identity")
    assert result.returncode == 0, result.stderr
    assert "colour: RGB, converted on the host" in result.stderr
    assert "planes, converted by the backend" not in result.stderr
    counts = compare(written, read_clip(output, layout), layout)
    assert counts["inside_changed"] > counts["inside"] / 20
