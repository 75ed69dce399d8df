"""The library at its extremes: frames of one pixel or one column, frames too large for the
backends or for memory, and arguments of the wrong type, each refused with a typed error
before any work (CPU backend; the GPU variants marked cuda)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.oracle import reference_chain

import streamconv
from streamconv.chain.filters import parse_chain
from streamconv.frames.checks import available_memory

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
POISON = 0x5A

# One of each CPU path: OpenCV's float rounding (box), a 1x1 table, exact taps straight through
# filter2D (sharpen), rows summed for a large kernel (gaussian 31), a magnitude bank (edge).
TINY_CHAINS = ["box:size=3", "custom:taps=0.3", "sharpen", "gaussian:size=31", "edge"]
# 1 x 1 frames, and frames 1 pixel wide whose last band of rows is 1 x 1 (65 and 129 rows).
TINY_SHAPES = [(1, 1), (1, 1, 1), (1, 1, 3), (65, 1), (129, 1, 1), (1, 65)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", TINY_SHAPES, ids=lambda shape: "x".join(map(str, shape)))
def test_frames_of_one_pixel_or_one_column_are_filtered_as_the_oracle_says(rng, backend, shape,
                                                                           dtype):
    """OpenCV's arithmetic read a 1 x 1 single-channel array as a Scalar and gave 4 x 1:
    ``Filter('box:size=3')`` of a 1x1 grey frame raised ValueError (cannot reshape)."""
    frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    for spec in TINY_CHAINS:
        with streamconv.Filter(spec, backend=backend) as tiny:
            out = np.full_like(frame, POISON)
            tiny.apply_into(out, frame)
            expected = reference_chain(frame, parse_chain([spec]), "reflect101")
            assert tiny(frame).shape == shape
        assert np.abs(out.astype(np.int64) - expected).max() <= 1, spec  # float32 against float64


def huge(shape: tuple[int, ...]) -> np.ndarray:
    """A frame of ``shape`` that takes one byte of memory, writable (every pixel the same one)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, (0,) * len(shape),
                                           writeable=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_too_large_are_refused_before_any_work(backend):
    """A 1 x 2^31 frame made OpenCV ask for 18446744067267100678 bytes (its 32-bit counts
    overflowed) and a 100000x100000x3 one raised a bare MemoryError: both are refused, typed,
    before any buffer, by Filter's calls and by StreamFilter's, as the CLI refuses them."""
    wide, large = huge((1, 2**31)), huge((100_000, 100_000, 3))
    available = available_memory()
    if available is None or available >= 2 * large.size:
        pytest.skip("this machine could hold a 100000x100000x3 frame and its result")
    with streamconv.Filter("box:size=3", backend=backend) as blur, \
            streamconv.StreamFilter("box:size=3", backend=backend) as stream:
        for frame, error, words in [(wide, streamconv.FrameFormatError, "too large to filter"),
                                    (large, streamconv.InputError, "of host memory, but only")]:
            for call in (lambda f=frame: blur(f), lambda f=frame: blur.apply_into(f, f),
                         lambda f=frame: stream.input_buffer(f.shape),
                         lambda f=frame: stream.submit(f)):
                with pytest.raises(error, match=words):
                    call()
        assert stream.pending == 0
        small = np.full((4, 5, 3), 90, np.uint8)  # the same objects still work
        assert blur(small)[0, 0].tolist() == [90, 90, 90]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("copy", [True, False])
def test_map_yields_every_frame_taken_before_its_iterable_failed_then_the_error(rng, backend, copy):
    """An iterable that raises after 6 frames (a camera lost, a file unreadable): map() yields
    the 6 outputs, in order, then raises the iterable's own error (it yielded 3 of them)."""
    frames = [rng.integers(0, 256, (8, 10, 3), dtype=np.uint8) for _ in range(6)]

    def capture():
        yield from frames
        raise OSError("camera lost")

    outputs = []
    with streamconv.StreamFilter("sharpen", ring=3, backend=backend) as stream:
        with pytest.raises(OSError, match="camera lost"):
            for output in stream.map(capture(), copy=copy):
                outputs.append(output.copy())
        assert stream.pending == 0
        assert len(list(stream.map(frames[:2]))) == 2  # and it goes on
    expected = [reference_chain(frame, parse_chain(["sharpen"]), "reflect101") for frame in frames]
    assert len(outputs) == 6
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("chain", [["sharpen"], ["tmean:frames=5"], ["scale:w=5,h=-2"]])
@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("bad, error", [(None, streamconv.FrameTypeError),
                                        (np.zeros((8, 10, 3), np.float32),
                                         streamconv.FrameTypeError),
                                        (np.zeros((8, 10, 2), np.uint8),
                                         streamconv.FrameFormatError)])
def test_map_yields_every_frame_taken_before_a_frame_it_refuses_then_its_error(rng, chain, copy,
                                                                               bad, error):
    """A frame submit() refuses (cv2's ``None`` once a capture ends, a float frame) ends a map()
    as an iterable's own error does: the outputs of the frames before it, then its error. They
    were dropped: the last ``ring + delay`` good frames never came out."""
    frames = [rng.integers(0, 256, (8, 10, 3), dtype=np.uint8) for _ in range(6)]
    outputs = []
    with streamconv.StreamFilter(chain, ring=3, backend="cpu") as stream:
        with pytest.raises(error):
            for output in stream.map(iter([*frames, bad, frames[0]]), copy=copy):
                outputs.append(output.copy())
        assert stream.pending == 0
        assert len(list(stream.map(frames[:2]))) == 2  # and it goes on
        expected = list(stream.map(frames))
    assert len(outputs) == 6
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, dtype, error", [
    ((-1, 8, 3), np.uint8, streamconv.FrameFormatError),
    ((8.5, 8, 3), np.uint8, streamconv.FrameFormatError),
    ("8x8", np.uint8, streamconv.FrameFormatError),
    ((8, 8, 2), np.uint8, streamconv.FrameFormatError),
    ((8, 8, 3), "bogus", streamconv.FrameTypeError),
    ((8, 8, 3), np.float32, streamconv.FrameTypeError),
])
def test_an_input_buffer_of_no_frame_type_is_a_typed_error_naming_it(shape, dtype, error):
    """It raised NumPy's ValueError or TypeError from inside (negative sizes, a float, a
    string); the error now names the input buffer's shape or dtype, and no slot is made."""
    with streamconv.StreamFilter("identity", backend="cpu") as stream:
        with pytest.raises(error, match="input buffer"):
            stream.input_buffer(shape, dtype)
        assert stream.input_buffer([4, 6]).shape == (4, 6)


@pytest.mark.parametrize("shape", [(10,), (0, 10, 3), (1080, 0), (-5, 10), (1080.5, 1920),
                                   "1080x1920", (1080, 1920, 2), (1080, 1920, 3, 1), None])
def test_output_shape_of_no_frame_shape_is_a_typed_error_naming_it(shape):
    """It raised IndexError or ZeroDivisionError from inside the scale stage, or answered a size
    for a shape no frame has ((100, 2) for an empty (1080, 0)); now a FrameFormatError names
    the shape, as a frame of it is refused."""
    with streamconv.Filter(["scale:w=-2,h=100"], backend="cpu") as chain:
        with pytest.raises(streamconv.FrameFormatError, match="shape"):
            chain.output_shape(shape)
        assert chain.output_shape([1080, 1920]) == (100, 178)


def _refusals(tmp_path):
    """(what is called, the error, words of its message) for arguments of the wrong type. The
    source and inputs named do not exist: an error about them would mean work had begun."""
    missing, out = str(tmp_path / "missing.mp4"), str(tmp_path / "out.mp4")
    kept = str(tmp_path / "kept.mp4")
    run = streamconv.Pipeline
    return [
        (lambda: run(missing, [], kept, backend="cpu", sink_options={"overwrite": "no"}),
         streamconv.OutputError, "overwrite must be True or False, got 'no'"),
        (lambda: run(missing, [], 42, backend="cpu"), streamconv.OutputError,
         "sink must be a path"),
        (lambda: run(missing, [], out, backend="cpu", sink_options={"crff": 23}),
         streamconv.OutputError, "sink_options: unknown option 'crff'"),
        (lambda: run(missing, [], out, backend="cpu", on_frame=5), streamconv.SettingsError,
         "on_frame must be callable"),
        (lambda: run(missing, [], out, backend="cpu", progress="no"), streamconv.SettingsError,
         "progress must be True or False"),
        (lambda: streamconv.FileSink(kept, width=8, height=8, frame_rate=25, overwrite="no"),
         streamconv.OutputError, "overwrite must be True or False"),
        (lambda: streamconv.FileSink(out, width="8", height=8, frame_rate=25),
         streamconv.OutputError, "width must be an integer"),
        (lambda: streamconv.FileSink(out, width=8, height=8, frame_rate=25, crf="high"),
         streamconv.OutputError, "crf must be a finite number"),
        (lambda: streamconv.open_source(missing, bogus=1), streamconv.InputError,
         "unknown option 'bogus'"),
        (lambda: streamconv.Batch([missing], [], tmp_path / "batch", backend="cpu", overwrite="no"),
         streamconv.OutputError, "overwrite must be True or False"),
        (lambda: streamconv.Batch([missing], [], tmp_path / "batch", backend="cpu",
                                  sink_options={"overwrite": "no"}),
         streamconv.OutputError, "overwrite"),
        (lambda: streamconv.Batch(missing, [], tmp_path / "batch", backend="cpu"),
         streamconv.InputError, "inputs must be a list"),
        (lambda: streamconv.run_many([missing], [], out, backend="cpu", bogus=1),
         streamconv.SettingsError, "run_many: unknown option 'bogus'"),
        (lambda: streamconv.run_many(missing, [], out, backend="cpu"), streamconv.InputError,
         "sources must be a list"),
        (lambda: streamconv.run_segments(missing, [], out, segments=2, backend="cpu", on_frame=5),
         streamconv.SettingsError, "on_frame must be callable"),
        (lambda: streamconv.run_segments(missing, [], out, segments=2, backend="cpu",
                                         sink_options={"crff": 1}), streamconv.OutputError, "crff"),
    ]


def test_library_arguments_of_the_wrong_type_are_typed_errors_naming_them_before_any_work(tmp_path):
    """Each was an untyped error from inside (TypeError, AttributeError, ValueError), at the
    first frame (on_frame=5), or nothing at all: ``sink_options={"overwrite": "no"}`` replaced
    a file, a string of inputs was read character by character. Now each is a streamconv error
    naming the argument, raised before the source is opened: nothing is written, the file kept."""
    (tmp_path / "kept.mp4").write_bytes(b"not to be replaced")
    for call, error, words in _refusals(tmp_path):
        with pytest.raises(error) as raised:
            call()
        assert words in str(raised.value)
    assert (tmp_path / "kept.mp4").read_bytes() == b"not to be replaced"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.mp4"]


def test_a_string_for_overwrite_never_replaces_a_file(tmp_path):
    """``sink_options={"overwrite": "no"}`` replaced an existing output: "no" is a true string."""
    from helpers.clips import write_clip

    clip, kept = write_clip(tmp_path / "in.mp4", frames=3), tmp_path / "kept.mp4"
    kept.write_bytes(b"not to be replaced")
    for overwrite in ("no", "false", 0):
        with pytest.raises(streamconv.OutputError, match="overwrite must be True or False"):
            streamconv.Pipeline(str(clip), [], str(kept), backend="cpu",
                                sink_options={"overwrite": overwrite}).run()
    assert kept.read_bytes() == b"not to be replaced"
