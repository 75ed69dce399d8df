"""A convolution layer on video (``--filter bank``), on the CPU backend (the GPU twin:
test_cuda_layer.py)."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv import nn
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.errors import FilterSpecError, FrameFormatError
from streamconv.chain.filters import parse_filter
from streamconv.nn.layer import compose_frame, mosaic

from helpers.nn import weights_file


def expected_frame(frame: np.ndarray, weights: np.ndarray, relu: bool, pool: int) -> np.ndarray:
    """The float64 layers, then the frame composition (the reference path)."""
    x = frame.transpose(2, 0, 1)[None].astype(np.float64)
    maps = nn.conv2d_reference(x, weights, padding=weights.shape[2] // 2)
    if relu:
        maps = nn.relu_reference(maps)
    if pool > 1:
        maps = nn.max_pool2d_reference(maps, pool)
    return compose_frame(maps[0], frame.shape, mosaic(weights.shape[0], frame.shape))


@pytest.mark.parametrize("maps,k,relu,pool",
                         [(1, 3, False, 1), (3, 5, True, 1), (8, 3, True, 2), (5, 7, False, 3),
                                              (3, 1, False, 2)])
def test_layer_matches_reference(rng, tmp_path, maps, k, relu, pool):
    weights = rng.uniform(-0.2, 0.2, (maps, 3, k, k))
    stage = parse_filter(
        f"bank:file={weights_file(tmp_path, weights)},relu={int(relu)},pool={pool}")
    frame = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    out = np.full_like(frame, 0xA5)
    CpuBackend([stage]).apply_into(out, frame)
    expected = expected_frame(frame, stage.layer.weights.astype(np.float64), relu, pool)
    assert np.abs(out.astype(int) - expected.astype(int)).max() <= 1


def test_layouts_known_values():
    maps = np.arange(4, dtype=np.float32).reshape(4, 1, 1) * 10  # four 1x1 maps: 0, 10, 20, 30
    grid = mosaic(4, (4, 6, 3))
    assert (grid.cols, grid.cell_h, grid.cell_w, grid.colour) == (2, 2, 3, False)
    frame = compose_frame(maps, (4, 6, 3), grid)
    assert frame[:, :, 0].tolist() == [[0, 0, 0, 10, 10, 10]] * 2 + [[20, 20, 20, 30, 30, 30]] * 2
    assert np.array_equal(frame[:, :, 0], frame[:, :, 2])
    three = compose_frame(np.array([[[1.5]], [[300]], [[-4]]], np.float32), (2, 2, 3),
                          mosaic(3, (2, 2, 3)))
    assert three[0, 0].tolist() == [2, 255, 0]  # colour: round half to even, saturate
    five = compose_frame(np.ones((5, 2, 2), np.float32), (5, 7, 3), mosaic(5, (5, 7, 3)))
    # 3 cells across, 2 down, each 2 x 2; maps 3 and 4 in the second row, then black
    assert five[:, :,
                0].tolist() == [[1, 1, 1, 1, 1, 1, 0]] * 2 + [[1, 1, 1, 1, 0, 0, 0]] * 2 + [[0] * 7]


def test_layer_spec_errors(tmp_path):
    with pytest.raises(FilterSpecError, match="give the weights as file="):
        parse_filter("bank")
    with pytest.raises(FilterSpecError, match="weights file not found"):
        parse_filter(f"bank:file={tmp_path / 'missing.npy'}")
    with pytest.raises(FilterSpecError, match=r"shape \(3, 3, 3\), expected \(M, C, K, K\)"):
        parse_filter(f"bank:file={weights_file(tmp_path, np.ones((3, 3, 3)))}")
    with pytest.raises(FilterSpecError, match="K = 4; it must be odd"):
        parse_filter(f"bank:file={weights_file(tmp_path, np.ones((2, 3, 4, 4)))}")
    with pytest.raises(FilterSpecError, match="NaN or infinity"):
        parse_filter(f"bank:file={weights_file(tmp_path, np.full((2, 3, 3, 3), np.nan))}")
    with pytest.raises(FilterSpecError, match="pool must be >= 1"):
        parse_filter(f"bank:file={weights_file(tmp_path, np.ones((2, 3, 3, 3)))},pool=0")
    (tmp_path / "text.npy").write_text("not numpy")
    with pytest.raises(FilterSpecError, match="not a readable .npy"):
        parse_filter(f"bank:file={tmp_path / 'text.npy'}")


def test_layer_frame_errors(tmp_path):
    stage = parse_filter(f"bank:file={weights_file(tmp_path, np.ones((2, 3, 3, 3)))},pool=4")
    with pytest.raises(FrameFormatError, match="frames have 1 channels, the weights expect 3"):
        CpuBackend([stage]).apply(np.zeros((8, 8, 1), np.uint8))
    with pytest.raises(FrameFormatError, match="smaller than pool=4"):
        CpuBackend([stage]).apply(np.zeros((3, 8, 3), np.uint8))


def test_layer_on_a_file(cli, sample_clip, tmp_path):
    """A transcode through a layer: real decode and encode, the frame size kept."""
    import av

    weights = np.zeros((4, 3, 3, 3))
    weights[:, :, 1, 1] = np.eye(4, 3)  # maps 0-2 copy R, G, B; map 3 is black
    out = tmp_path / "maps.mp4"
    result = cli("run", str(sample_clip), "-o", str(out), "--backend", "cpu", "--max-frames", "5",
                 "--filter", f"bank:file={weights_file(tmp_path, weights)},relu=1,pool=2")
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 5 and frames[0].shape == (360, 640, 3)
    # the fourth cell (bottom right) is black, up to coding noise
    assert frames[0][200:, 340:].max() < 40
