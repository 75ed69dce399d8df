"""Host frames that are not fresh C-contiguous arrays (outputs that overlap their input;
transposed, Fortran-order and broadcast inputs), and the clear errors of odd arguments."""

from __future__ import annotations

import numpy as np
import pytest

import streamconv
from streamconv.frames.checks import MAX_RING

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
POISON = 7
# The direct filter2D path (exact 3x3 taps), the 1x1 table, the float path and a chain.
SPECS = ["emboss", "sharpen", "laplacian", "sobel-x", "custom:taps=0.5",
         "custom:taps=0,0,0;0,2,0;0,0,0", "gaussian:sigma=1", "edge", ("sharpen", "emboss")]
SHIFTS = [(0, 1), (1, 0), (2, 3), (3, 2), (-2, -3), (5, 0), (0, 8), (1, 1)]


def expected_output(spec, frame: np.ndarray, backend: str = "cpu") -> np.ndarray:
    """``backend``'s result for a C-contiguous copy of ``frame``, into a new array (the GPU is
    within 1 LSB of the CPU, tested elsewhere; here the layout must change nothing)."""
    with streamconv.Filter(list(spec) if isinstance(spec, tuple) else spec,
                           backend=backend) as chain:
        return chain(np.ascontiguousarray(frame))


def overlapping_views(rng, shape: tuple[int, ...], dtype, shift: tuple[int, int]):
    """(src, dst): views of ``shape`` into one random buffer, dst ``shift`` (rows, columns) from
    src;
    dst's samples outside src are poisoned."""
    pad = 8
    height, width = shape[:2]
    buffer = rng.integers(0, np.iinfo(dtype).max + 1,
                          (height + 2 * pad, width + 2 * pad) + shape[2:], dtype=dtype)
    outside = np.ones(buffer.shape[:2], bool)
    outside[pad:pad + height, pad:pad + width] = False
    buffer[outside] = POISON
    rows, cols = pad + shift[0], pad + shift[1]
    return buffer[pad:pad + height, pad:pad + width], buffer[rows:rows + height, cols:cols + width]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", [(16, 16, 3), (16, 17), (16, 16, 4)])
@pytest.mark.parametrize("how", ["apply_into", "out"])
def test_output_overlapping_its_input_gets_the_result_of_a_copy(rng, backend, spec, dtype, shape,
                                                                how):
    with streamconv.Filter(list(spec) if isinstance(spec, tuple) else spec,
                           backend=backend) as chain:
        for shift in SHIFTS:
            src, dst = overlapping_views(rng, shape, dtype, shift)
            assert np.shares_memory(src, dst)
            expected = expected_output(spec, src, backend)
            if how == "out":
                assert chain(src, out=dst) is dst
            else:
                chain.apply_into(dst, src)
            np.testing.assert_array_equal(dst, expected, err_msg=f"shift {shift}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_that_is_the_input_or_its_mirror(rng, backend):
    with streamconv.Filter("emboss", backend=backend) as chain:
        frame = rng.integers(0, 256, (20, 24, 3), np.uint8)
        expected = expected_output("emboss", frame, backend)
        chain.apply_into(frame, frame)  # the same view: in place
        np.testing.assert_array_equal(frame, expected)
        frame = rng.integers(0, 256, (20, 24, 3), np.uint8)
        expected = expected_output("emboss", frame, backend)
        chain.apply_into(frame[::-1], frame)  # the same memory, rows reversed
        np.testing.assert_array_equal(frame[::-1], expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["submit", "map"])
def test_stream_filter_input_overlapping_its_slot(rng, backend, how):
    # Large enough (over 1 MiB) that the copy into the slot runs in bands on several threads.
    shape = (600, 700, 3)
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        for _ in range(3):
            buffer = sf.input_buffer(shape)
            buffer[...] = rng.integers(0, 256, shape, np.uint8)
            frame = buffer[::-1]  # the slot's own memory, rows reversed
            expected = expected_output("emboss", frame, backend)
            if how == "submit":
                sf.submit(frame)
                got = sf.result(out=np.full(shape, POISON, np.uint8))
            else:
                [got] = list(sf.map([frame]))
            np.testing.assert_array_equal(got, expected)


def odd_layouts(rng, dtype=np.uint8) -> dict[str, np.ndarray]:
    base = rng.integers(0, np.iinfo(dtype).max + 1, (20, 30, 3), dtype)
    return {"transposed": base.transpose(1, 0, 2), "grey transposed": base[:, :, 0].T,
            "fortran": np.asfortranarray(base), "grey fortran": np.asfortranarray(base[:, :, 1]),
            "broadcast": np.broadcast_to(base[:1], base.shape),
            "broadcast grey": np.broadcast_to(base[:, :1, 2], (20, 30))}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec",
                         ["box:size=3", "emboss", "custom:taps=0.5", "gaussian:sigma=2", "edge",
                                  ("sharpen", "box")])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_transposed_fortran_and_broadcast_inputs_give_a_new_c_array(rng, backend, spec, dtype):
    with streamconv.Filter(list(spec) if isinstance(spec, tuple) else spec,
                           backend=backend) as chain:
        for name, frame in odd_layouts(rng, dtype).items():
            got = chain(frame)
            assert got.shape == frame.shape and got.dtype == frame.dtype and \
                got.flags.c_contiguous, name
            np.testing.assert_array_equal(got, expected_output(spec, frame, backend), err_msg=name)
            into = np.full(frame.shape, POISON, dtype).T.copy().T  # a Fortran-order output
            chain.apply_into(into, frame)
            np.testing.assert_array_equal(into, got, err_msg=name)


@pytest.mark.parametrize("border", [["zero"], ("zero",), {"zero": 1}, None, 0])
def test_a_border_that_is_not_a_name_is_refused_clearly(border):
    with pytest.raises(streamconv.SettingsError,
                       match="unknown border mode .*; known: zero, replicate, reflect101"):
        streamconv.Filter("box", border=border, backend="cpu")


@pytest.mark.parametrize("path, what",
                         [("/tmp", "a folder, not a file"), ("/dev/zero", "not a regular file"),
                                        ("/dev/null", "not a regular file")])
@pytest.mark.parametrize("suffix", ["", ".npy"])
def test_a_taps_file_that_is_a_folder_or_a_device_says_so(tmp_path, path, what, suffix):
    if suffix:  # a folder or a device named like a .npy file
        target = tmp_path / f"taps{suffix}"
        target.symlink_to(path)
        path = str(target)
    with pytest.raises(streamconv.FilterSpecError, match=f"custom taps file {path}: {what}"):
        streamconv.Filter(f"custom:file={path}", backend="cpu")
    with pytest.raises(streamconv.FilterSpecError,
                       match=f"custom taps file not found: {path}/absent"):
        streamconv.Filter(f"custom:file={path}/absent", backend="cpu")


@pytest.mark.parametrize("taps",
                         [np.ones((3, 3), complex), np.ones((1, 1), np.complex64), [[1 + 0j]],
                                  np.array([[None]]),
                          np.array([[1, 2, 1]] * 3, dtype=object).astype(complex),
                                  np.array([[1.0, None, 1.0]] * 3, dtype=object),
                          np.array([["1"]])])
def test_taps_that_are_not_real_numbers_are_refused(recwarn, taps):
    with pytest.raises(streamconv.FilterSpecError, match="taps must be real numbers"):
        streamconv.Filter(np.asarray(taps), backend="cpu")
    assert not [w for w in recwarn if issubclass(w.category, np.exceptions.ComplexWarning)]


def test_real_taps_of_any_numeric_dtype_and_real_objects_are_accepted(rng):
    frame = rng.integers(0, 256, (9, 11, 3), np.uint8)
    expected = expected_output("box:size=3", frame)
    for taps in (np.ones((3, 3), np.int16) / 9, np.full((3, 3), 1 / 9, np.float32),
                 np.full((3, 3), 1 / 9, dtype=object)):
        with streamconv.Filter(taps, backend="cpu") as blur:
            np.testing.assert_array_equal(blur(frame), expected)


def test_complex_npy_taps_are_refused_like_a_complex_array(tmp_path):
    path = tmp_path / "taps.npy"
    np.save(path, np.ones((3, 3), complex))
    with pytest.raises(streamconv.FilterSpecError, match=f"taps file {path}: dtype complex128"):
        streamconv.Filter(f"custom:file={path}", backend="cpu")
    with pytest.raises(streamconv.FilterSpecError, match="taps array: dtype complex128"):
        streamconv.Filter(np.ones((3, 3), complex), backend="cpu")


@pytest.mark.parametrize("ring", [MAX_RING + 1, 10**8])
def test_stream_filter_ring_is_bounded_like_the_command(ring):
    with pytest.raises(streamconv.SettingsError,
                       match=f"ring must be an integer from 1 to {MAX_RING}, got {ring}"):
        streamconv.StreamFilter("identity", ring=ring, backend="cpu")
    with streamconv.StreamFilter("identity", ring=MAX_RING, backend="cpu") as sf:
        assert sf.ring == MAX_RING


def test_stream_filter_slots_that_do_not_fit_in_memory_are_refused_before_any(rng, monkeypatch):
    import streamconv.frames.checks

    monkeypatch.setattr(streamconv.frames.checks, "available_memory", lambda: 10_000)
    frame = rng.integers(0, 256, (20, 30, 3), np.uint8)
    with streamconv.StreamFilter("identity", ring=4, backend="cpu") as sf:
        with pytest.raises(streamconv.InputError, match="5 slot"):
            sf.submit(frame)
        monkeypatch.setattr(streamconv.frames.checks, "available_memory", lambda: None)
        sf.submit(frame)
        np.testing.assert_array_equal(sf.result(out=np.full_like(frame, POISON)), frame)
