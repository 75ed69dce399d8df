"""The filter registry: building, spec parsing, known taps and every malformed input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamconv.chain.filters import (
                                      MAX_SIZE,
                                      REGISTRY,
                                      build_filter,
                                      describe_registry,
                                      parse_chain,
                                      parse_filter,
                                      split_spec,
                                      )
from streamconv.errors import FilterSpecError


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_filter_builds_with_defaults(name, tmp_path):
    if name == "custom":
        stage = parse_filter("custom:taps=1")
    elif name == "conv3d":
        stage = parse_filter("conv3d:taps=1|1|1")
        assert stage.taps == () and stage.temporal.taps.shape == (3, 1, 1)
    elif name == "bank":
        np.save(tmp_path / "w.npy", np.ones((2, 3, 3, 3)))
        stage = parse_filter(f"bank:file={tmp_path / 'w.npy'}")
        assert stage.taps == () and stage.size == 3 and stage.layer.weights.dtype == np.float32
    else:
        stage = build_filter(name)
    for taps in stage.taps:
        assert taps.dtype == np.float32 and taps.flags.c_contiguous and not taps.flags.writeable
        assert taps.shape == (stage.size, stage.size) and stage.size % 2 == 1


def test_known_taps():
    assert parse_filter("identity").taps[0].tolist() == [[1.0]]
    np.testing.assert_allclose(parse_filter("box:size=5").taps[0], np.full((5, 5), 1 / 25),
                               rtol=1e-6)
    assert parse_filter("sharpen").taps[0].tolist() == [[0, -1, 0], [-1, 5, -1], [0, -1, 0]]
    assert parse_filter("sharpen:amount=0.5").taps[0].tolist() == [[0, -0.5, 0], [-0.5, 3, -0.5],
                                                                   [0, -0.5, 0]]
    assert parse_filter("laplacian").taps[0].tolist() == [[0, 1, 0], [1, -4, 1], [0, 1, 0]]
    assert parse_filter("sobel-x").taps[0].tolist() == [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]
    assert parse_filter("sobel-y").taps[0].tolist() == [[-1, -2, -1], [0, 0, 0], [1, 2, 1]]
    edge = parse_filter("edge")
    assert edge.combine == "magnitude" and len(edge.taps) == 2


@pytest.mark.parametrize("sigma, size", [(0.5, 5), (1.0, 7), (1.5, 11), (5.0, 31)])
def test_gaussian_default_size_and_normalization(sigma, size):
    stage = parse_filter(f"gaussian:sigma={sigma}")
    assert stage.size == size == 2 * math.ceil(3 * sigma) + 1
    taps = stage.taps[0].astype(np.float64)
    assert abs(taps.sum() - 1.0) < 1e-5
    np.testing.assert_allclose(taps, taps.T)
    assert taps.argmax() == (size * size) // 2


def test_gaussian_explicit_size_and_too_wide_sigma():
    assert parse_filter("gaussian:sigma=6,size=31").size == 31
    with pytest.raises(FilterSpecError, match="size=31 to truncate"):
        parse_filter("gaussian:sigma=6")


def test_custom_inline_file_and_normalize(tmp_path):
    inline = parse_filter("custom:taps=0,-1,0;-1,5,-1;0,-1,0")
    assert inline.taps[0].tolist() == [[0, -1, 0], [-1, 5, -1], [0, -1, 0]]
    normalized = parse_filter("custom:taps=1,2,1;2,4,2;1,2,1,normalize=1")
    assert abs(float(normalized.taps[0].sum()) - 1.0) < 1e-6
    text = tmp_path / "taps.txt"
    text.write_text("# a blur\n1 2 1\n2 4 2\n1 2 1\n")
    assert parse_filter(f"custom:file={text}").taps[0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
    npy = tmp_path / "taps.npy"
    np.save(npy, np.arange(25, dtype=np.int32).reshape(5, 5))
    assert parse_filter(f"custom:file={npy},normalize=true").size == 5


def test_spec_parsing_keeps_commas_inside_values():
    name, params = split_spec(" Custom : taps=1,2,3;4,5,6;7,8,9 , normalize=1")
    assert name == "custom" and params == {"taps": "1,2,3;4,5,6;7,8,9", "normalize": "1"}
    chain = parse_chain(["box:size=3", "edge"])
    assert [s.name for s in chain] == ["box", "edge"]


@pytest.mark.parametrize("spec, message", [
    ("", "empty filter spec"),
    ("nope", "unknown filter 'nope'; known filters: identity, box"),
    ("box:radius=2", "unknown parameter 'radius'"),
    ("box:size=4", "size must be odd"),
    ("box:size=33", "size must be odd and 1..31"),
    ("box:size=two", "expected an integer"),
    ("box:size=2.5", "expected an integer"),
    ("gaussian:sigma=-1", "sigma must be a positive"),
    ("gaussian:sigma=nan", "finite number"),
    ("sharpen:amount=inf", "finite number"),
    ("box:size=3,size=5", "given twice"),
    ("box:=3", "missing parameter name"),
    ("box:3", "expected key=value"),
    ("custom", "exactly one of taps"),
    ("custom:taps=1,2;3", "rows have different lengths (2, 1)"),
    ("custom:taps=1,x,3", "'x' is not a number"),
    ("custom:taps=1,nan,1;1,1,1;1,1,1", "NaN or infinity"),
    ("custom:taps=1,inf,1;1,1,1;1,1,1", "NaN or infinity"),
    ("custom:taps=1,2;3,4", "odd square matrix, got 2x2"),
    ("custom:taps=1,2,3", "odd square matrix, got 1x3"),
    ("custom:taps=1e9", "exceeds"),
    ("custom:taps=1,-1,0;0,0,0;0,0,0,normalize=1", "cannot normalize"),
    ("custom:taps=;", "row 1 is empty"),
    ("custom:file=/nonexistent/taps.npy", "taps file not found"),
    ("custom:taps=1,normalize=maybe", "expected a boolean"),
])
def test_malformed_specs_say_what_is_wrong(spec, message):
    with pytest.raises(FilterSpecError) as info:
        parse_filter(spec)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_too_large_taps_matrix_and_file(tmp_path):
    big = ";".join([",".join(["1"] * (MAX_SIZE + 2))] * (MAX_SIZE + 2))
    with pytest.raises(FilterSpecError, match="too large"):
        parse_filter(f"custom:taps={big}")
    huge = tmp_path / "huge.txt"
    huge.write_text("1 " * 600_000)
    with pytest.raises(FilterSpecError, match="too large"):
        parse_filter(f"custom:file={huge}")
    bad = tmp_path / "strings.npy"
    np.save(bad, np.array([["a"]]))
    with pytest.raises(FilterSpecError, match="not numeric"):
        parse_filter(f"custom:file={bad}")


def test_describe_registry_lists_every_filter_and_parameter():
    text = describe_registry()
    for name, entry in REGISTRY.items():
        assert name in text
        for key in entry.params:
            assert f"{key}=" in text
