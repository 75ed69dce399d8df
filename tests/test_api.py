"""The library API (Filter, StreamFilter, Pipeline from Python) on the CPU and, marked cuda, the GPU."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import streamconv
import streamconv.api
from streamconv.backends.cpu import CpuBackend
from streamconv.filters import parse_chain

from oracle import reference_chain

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
POISON = 0x5A


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(37, 53, 3), (37, 53), (37, 53, 4), (1, 1, 3)])
def test_filter_call_and_into_match_the_oracle(rng, backend, shape):
    frame = rng.integers(0, 256, shape, dtype=np.uint8)
    with streamconv.Filter(["sharpen", "edge"], backend=backend) as chain:
        out = chain(frame)
        into = np.full_like(frame, POISON)
        chain.apply_into(into, frame)
    expected = reference_chain(frame, parse_chain(["sharpen", "edge"]), "reflect101")
    assert out.shape == shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out, expected)  # integer taps: exact
    np.testing.assert_array_equal(into, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_filter_accepts_views_and_taps_arrays(rng, backend):
    big = rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)
    view = big[5:80:3, 7:100]
    bgr = view[:, :, ::-1]
    taps = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16
    with streamconv.Filter(taps, border="replicate", backend=backend) as blur:
        got = blur(view)
        reversed_channels = blur(bgr)
        dst = np.full((big.shape[0], big.shape[1] + 10, 3), POISON, np.uint8)[: view.shape[0], 3: 3 + view.shape[1]]
        blur.apply_into(dst, view)
    expected = CpuBackend(streamconv.api.to_stages(taps), border="replicate").apply(np.ascontiguousarray(view))
    np.testing.assert_array_equal(got, expected)  # multiples of 1/256: exact
    np.testing.assert_array_equal(reversed_channels, got[:, :, ::-1])  # per-channel: BGR or RGB alike
    np.testing.assert_array_equal(dst, got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_frames_raise_typed_errors_with_actual_and_expected(backend):
    with streamconv.Filter("box:size=3", backend=backend) as blur:
        with pytest.raises(TypeError, match="float64 != uint8 or uint16"):
            blur(np.zeros((4, 4, 3)))
        with pytest.raises(streamconv.FrameTypeError, match="expected a numpy.ndarray, got list"):
            blur([[1, 2], [3, 4]])
        with pytest.raises(ValueError, match=r"\(4, 4, 2\) != \(H, W\), \(H, W, 3\) or \(H, W, 4\)"):
            blur(np.zeros((4, 4, 2), np.uint8))
        with pytest.raises(streamconv.FrameFormatError, match=r"unexpected output shape: \(4, 5, 3\) != \(4, 4, 3\)"):
            blur.apply_into(np.zeros((4, 5, 3), np.uint8), np.zeros((4, 4, 3), np.uint8))


def test_bad_specs_and_ring():
    with pytest.raises(streamconv.FilterSpecError, match="got int"):
        streamconv.Filter(3, backend="cpu")
    with pytest.raises(ValueError, match="expected an odd square matrix, got 2x2"):
        streamconv.Filter(np.ones((2, 2)), backend="cpu")
    with pytest.raises(ValueError, match="ring must be an integer >= 1, got 0"):
        streamconv.StreamFilter("edge", ring=0, backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ring", [1, 2, 3])
def test_stream_filter_map_keeps_order_and_matches_filter(rng, backend, ring):
    frames = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(10)]
    with streamconv.Filter("gaussian:sigma=1", backend=backend) as single:
        expected = [single(frame) for frame in frames]
    with streamconv.StreamFilter("gaussian:sigma=1", ring=ring, backend=backend) as sf:
        got = list(sf.map(iter(frames)))
    assert len(got) == 10
    for out, want in zip(got, expected):
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_filter_map_without_copies_yields_read_only_views(rng, backend):
    frames = [rng.integers(0, 256, (36, 52, 3), dtype=np.uint8) for _ in range(7)]
    cpu = streamconv.Filter("sharpen", backend="cpu")
    with streamconv.StreamFilter("sharpen", ring=3, backend=backend) as sf:
        for frame, view in zip(frames, sf.map(frames, copy=False)):
            assert not view.flags.writeable
            np.testing.assert_array_equal(view, cpu(frame))  # checked before the next iteration


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_filter_map_copies_the_next_frame_during_your_work_and_survives_leaving_early(rng, backend):
    # Frames over the copier's 1 MB threshold, so map() stages each next frame on its threads
    # while the loop body runs; a shape change mid-stream goes through submit() instead.
    frames = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in [(600, 700, 3)] * 5 + [(601, 700, 3)] * 3]
    cpu = streamconv.Filter("sharpen", backend="cpu")
    with streamconv.StreamFilter("sharpen", ring=2, backend=backend) as sf:
        seen = 0
        for frame, view in zip(frames, sf.map(iter(frames), copy=False)):
            np.testing.assert_array_equal(view, cpu(frame))
            seen += 1
        assert seen == len(frames) and sf.pending == 0
        outputs = sf.map(iter(frames))
        first = [next(outputs) for _ in range(3)]  # suspended with the next frame staged
        assert sf.pending == 2
        outputs.close()  # leaving the loop early drops the staged frame, and frees its slot
        assert sf.pending == 1
        np.testing.assert_array_equal(sf.result(), cpu(frames[3]))
        for frame, out in zip(frames, first):
            np.testing.assert_array_equal(out, cpu(frame))
        again = list(sf.map(frames[:4]))  # every slot is back in use
        for frame, out in zip(frames, again):
            np.testing.assert_array_equal(out, cpu(frame))
        outputs = sf.map(iter(frames))
        next(outputs)
        next(outputs)
    # closed while a frame was being staged: the copy is waited for, nothing is left pending
    assert sf.pending == 0
    outputs.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_captured_into_input_buffers_are_submitted_without_a_copy(rng, backend, monkeypatch):
    frames = [rng.integers(0, 256, (40, 60, 3), dtype=np.uint8) for _ in range(5)]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        copies = []
        copy = sf._copier.copy
        monkeypatch.setattr(sf._copier, "copy", lambda dst, src: (copies.append(src.shape), copy(dst, src)))
        outputs = []
        for frame in frames:  # more frames than the ring
            buffer = sf.input_buffer(frame.shape)
            assert not sf._ready  # the spare slot: reserving finished (and copied out) nothing
            assert buffer.shape == frame.shape and buffer.dtype == np.uint8 and buffer.flags.writeable
            assert np.shares_memory(sf.input_buffer(frame.shape), buffer)  # asked again: the same one
            buffer[:] = frame  # the application's capture.read(buffer)
            if sf.pending == sf.ring:
                outputs.append(sf.result())
            sf.submit(buffer)
            assert sf.pending <= sf.ring
        outputs += [sf.result() for _ in range(sf.pending)]
        assert copies == []
        for frame, out in zip(frames, outputs):
            np.testing.assert_array_equal(out, cpu(frame))

        buffer = sf.input_buffer((40, 60, 3))
        buffer[:] = POISON
        sf.submit(frames[1])  # another array while a buffer is reserved: copied into that slot
        assert copies == [(40, 60, 3)]
        np.testing.assert_array_equal(sf.result(), cpu(frames[1]))

        grey = rng.integers(0, 65536, (33, 17), dtype=np.uint16)
        sf.input_buffer((40, 60, 3))  # reserved, then given up by the change of frame type
        buffer = sf.input_buffer(grey.shape, np.uint16)
        assert buffer.shape == (33, 17) and buffer.dtype == np.uint16
        buffer[:] = grey
        sf.submit(buffer)
        np.testing.assert_array_equal(sf.result(), cpu(grey))
        assert sf.pending == 0 and copies == [(40, 60, 3)]

        with pytest.raises(streamconv.FrameFormatError, match=r"\(4, 5, 2\)"):
            sf.input_buffer((4, 5, 2))
        with pytest.raises(streamconv.FrameTypeError, match="float32"):
            sf.input_buffer((4, 5, 3), np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_filter_submit_past_the_ring_and_shape_changes(rng, backend):
    frames = [rng.integers(0, 256, shape, dtype=np.uint8)
              for shape in [(20, 30, 3)] * 4 + [(21, 17)] * 2 + [(20, 30, 3)]]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        for frame in frames:
            sf.submit(frame)  # more than the ring holds, and two shape changes
        assert sf.pending == len(frames)
        out = np.full(frames[0].shape, POISON, np.uint8)
        assert sf.result(out=out) is out
        results = [out] + [sf.result() for _ in frames[1:]]
        with pytest.raises(streamconv.StreamconvError, match="no frame submitted"):
            sf.result()
    for frame, result in zip(frames, results):
        assert result.shape == frame.shape
        np.testing.assert_array_equal(result, cpu(frame))


def test_pipeline_from_python_with_names_objects_and_callback(tmp_path, rng):
    frames = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(6)]
    seen = []
    stats = streamconv.Pipeline(streamconv.ArraySource(frames), ["edge"], None, backend="cpu",
                                on_frame=lambda frame, meta: seen.append(meta.index)).run()
    assert stats.frames == 6 and seen == list(range(6))
    out = tmp_path / "pattern.mkv"
    stats = streamconv.Pipeline("test:64x48,frames=5", ["box:size=3"], str(out), backend="cpu",
                                sink_options={"codec": "ffv1", "pix_fmt": "bgr0"}).run()
    assert stats.frames == 5 and out.is_file()
    with streamconv.FileSource(out) as source:
        assert len(list(source)) == 5


def test_public_api_is_exported_and_documented():
    for name in streamconv.__all__:
        item = getattr(streamconv, name)
        if callable(item) and not isinstance(item, type(streamconv.BORDER_MODES)):
            assert item.__doc__, f"streamconv.{name} has no docstring"
    for name in ("Filter", "StreamFilter", "Pipeline", "FilterStage", "FileSource", "FileSink"):
        assert name in streamconv.__all__


@pytest.mark.parametrize("module", ["api", "pipeline", "sources", "filters", "presets"])
def test_docstring_examples_run(module):
    failures, tried = doctest.testmod(getattr(streamconv, module), verbose=False)
    assert tried >= 1 and failures == 0
