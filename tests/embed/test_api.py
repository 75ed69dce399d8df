"""The library API (Filter, StreamFilter, Pipeline from Python) on the CPU and, marked cuda, the
GPU."""

from __future__ import annotations

import copy
import doctest
import gc
import importlib
import pickle
import re

import numpy as np
import pytest

import streamconv
import streamconv.embed.filter
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import parse_chain

from helpers.oracle import reference_chain

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
        dst = np.full((big.shape[0], big.shape[1] + 10, 3), POISON, np.uint8)[: view.shape[0],
                                                                              3: 3 + view.shape[1]]
        blur.apply_into(dst, view)
    expected = CpuBackend(streamconv.embed.filter.to_stages(taps),
                          border="replicate").apply(np.ascontiguousarray(view))
    np.testing.assert_array_equal(got, expected)  # multiples of 1/256: exact
    # per-channel: BGR or RGB alike
    np.testing.assert_array_equal(reversed_channels, got[:, :, ::-1])
    np.testing.assert_array_equal(dst, got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_frames_raise_typed_errors_with_actual_and_expected(backend):
    with streamconv.Filter("box:size=3", backend=backend) as blur:
        with pytest.raises(TypeError, match="float64 != uint8 or uint16"):
            blur(np.zeros((4, 4, 3)))
        with pytest.raises(streamconv.FrameTypeError, match="expected a numpy.ndarray, got list"):
            blur([[1, 2], [3, 4]])
        with pytest.raises(ValueError,
                           match=r"\(4, 4, 2\) != \(H, W\), \(H, W, 3\) or \(H, W, 4\)"):
            blur(np.zeros((4, 4, 2), np.uint8))
        with pytest.raises(streamconv.FrameFormatError,
                           match=r"unexpected output shape: \(4, 5, 3\) != \(4, 4, 3\)"):
            blur.apply_into(np.zeros((4, 5, 3), np.uint8), np.zeros((4, 4, 3), np.uint8))


def test_bad_specs_and_ring():
    with pytest.raises(streamconv.FilterSpecError, match="got int"):
        streamconv.Filter(3, backend="cpu")
    with pytest.raises(ValueError, match="expected an odd square matrix, got 2x2"):
        streamconv.Filter(np.ones((2, 2)), backend="cpu")
    with pytest.raises(ValueError, match="ring must be an integer from 1 to 64, got 0"):
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
def test_stream_filter_map_copies_the_next_frame_during_your_work_and_survives_leaving_early(
        rng, backend):
    # Frames over the copier's 1 MB threshold, so map() stages each next frame on its threads
    # while the loop body runs; a shape change mid-stream goes through submit() instead.
    frames = [rng.integers(0, 256, shape, dtype=np.uint8)
              for shape in [(600, 700, 3)] * 5 + [(601, 700, 3)] * 3]
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
        outputs.close()  # leaving the loop early drops the staged frame and those in flight
        assert sf.pending == 0 and len(sf._free) == sf.ring + 1  # every slot is free again
        with pytest.raises(streamconv.StreamconvError, match="no frame submitted"):
            sf.result()
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
        monkeypatch.setattr(sf._copier, "copy",
                            lambda dst, src: (copies.append(src.shape), copy(dst, src)))
        outputs = []
        for frame in frames:  # more frames than the ring
            buffer = sf.input_buffer(frame.shape)
            assert not sf._ready  # the spare slot: reserving finished (and copied out) nothing
            assert buffer.shape == frame.shape and buffer.dtype == np.uint8 and \
                buffer.flags.writeable
            # asked again: the same one
            assert np.shares_memory(sf.input_buffer(frame.shape), buffer)
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


# Views an output may be, each made over a bigger base array filled with POISON; name -> (shape,
# dtype) -> (base, view). Every one is a layout OpenCV cannot write into directly.
def _every_second_pixel(shape, dtype):
    base = np.full((2 * shape[0], 2 * shape[1]) + shape[2:], POISON, dtype)
    return base, base[::2, ::2]


def _upside_down(shape, dtype):
    base = np.full((shape[0] + 3,) + shape[1:], POISON, dtype)
    return base, base[1:shape[0] + 1][::-1]


def _mirrored(shape, dtype):
    base = np.full(shape, POISON, dtype)
    return base, base[:, ::-1]


def _transposed(shape, dtype):
    base = np.full((shape[1], shape[0]) + shape[2:], POISON, dtype)
    return base, base.swapaxes(0, 1)


def _fortran(shape, dtype):
    base = np.asfortranarray(np.full(shape, POISON, dtype))
    return base, base[:]


def _reversed_channels(shape, dtype):  # BGR into an RGB array
    base = np.full(shape, POISON, dtype)
    return base, base[..., ::-1]


def _every_second_channel(shape, dtype):
    base = np.full(shape[:2] + (2 * shape[2],), POISON, dtype)
    return base, base[..., ::2]


OUTPUT_VIEWS = {view.__name__.strip("_"): view for view in (
    _every_second_pixel, _upside_down, _mirrored, _transposed, _fortran, _reversed_channels,
    _every_second_channel)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", OUTPUT_VIEWS)
@pytest.mark.parametrize("shape", [(23, 31, 3), (23, 31), (23, 31, 4)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_apply_into_writes_through_any_writable_view(rng, backend, view, shape, dtype):
    if len(shape) == 2 and "channel" in view:
        pytest.skip("a grey frame has no channel axis to stride")
    src = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    base, dst = OUTPUT_VIEWS[view](shape, dtype)
    assert dst.shape == shape and dst.flags.writeable and not dst.flags.c_contiguous
    with streamconv.Filter(["sharpen", "box:size=5"], backend=backend) as chain:
        chain.apply_into(dst, src)
        expected = chain(src)
    np.testing.assert_array_equal(dst, expected)
    dst[...] = POISON
    assert np.all(base == POISON)  # nothing was written outside the view


@pytest.mark.parametrize("backend", BACKENDS)
def test_apply_into_refuses_outputs_it_cannot_fill_before_any_work(rng, backend, monkeypatch):
    src = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    read_only = np.full_like(src, POISON)
    read_only.flags.writeable = False
    with streamconv.Filter("emboss", backend=backend) as emboss:
        monkeypatch.setattr(emboss._engine, "apply_into",
                            lambda dst, src: pytest.fail("filtered anyway"))
        for dst in (read_only, np.broadcast_to(np.uint8(POISON), src.shape)):
            with pytest.raises(streamconv.FrameFormatError,
                               match="output frame is read-only") as info:
                emboss.apply_into(dst, src)
            # as NumPy's "assignment destination is read-only"
            assert isinstance(info.value, ValueError)
        assert np.all(read_only == POISON)
        with pytest.raises(streamconv.FrameTypeError,
                           match="unexpected output dtype: uint16 != uint8"):
            emboss.apply_into(np.zeros(src.shape, np.uint16), src)
        with pytest.raises(streamconv.FrameFormatError,
                           match=r"unexpected output shape: \(12, 16, 4\) != \(12, 16, 3\)"):
            emboss.apply_into(np.zeros((12, 16, 4), np.uint8), src)
        with pytest.raises(streamconv.FrameTypeError,
                           match="output frame: expected a numpy.ndarray, got list"):
            emboss.apply_into(src.tolist(), src)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_filter_result_into_views_and_read_only_outputs(rng, backend):
    frames = [rng.integers(0, 256, (14, 18, 3), dtype=np.uint8) for _ in range(2)]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        for frame in frames:
            sf.submit(frame)
        read_only = np.zeros_like(frames[0])
        read_only.flags.writeable = False
        with pytest.raises(streamconv.FrameFormatError, match="output frame is read-only"):
            sf.result(out=read_only)
        assert sf.pending == 2  # the refused out lost no frame
        base, view = _every_second_pixel(frames[0].shape, np.uint8)
        assert sf.result(out=view) is view
        np.testing.assert_array_equal(view, cpu(frames[0]))
        np.testing.assert_array_equal(sf.result(), cpu(frames[1]))


def _leave_early(sf, frames, how):
    """Start sf.map(frames), take two outputs and leave it the way ``how`` says; returns the map
    when it is kept (suspended, still referenced), else None."""
    outputs = sf.map(iter(frames))
    if how == "break":
        for number, _ in enumerate(outputs):
            if number == 1:
                break
        return None
    if how == "exception":
        with pytest.raises(KeyError):
            for number, _ in enumerate(outputs):
                if number == 1:
                    raise KeyError("the loop body failed")
        return None
    next(outputs)
    next(outputs)
    if how == "garbage-collected":
        del outputs
        gc.collect()
        return None
    return outputs  # "kept": suspended; the next map() takes over


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ring", [1, 2, 3])
@pytest.mark.parametrize("how", ["break", "exception", "garbage-collected", "kept"])
@pytest.mark.parametrize("shape", [(20, 30, 3), (600, 700, 3)], ids=["small", "staged"])
def test_map_left_early_leaves_nothing_for_the_next_map(rng, backend, ring, how, shape):
    # "staged": frames over the copier's 1 MB threshold, so the next frame is being copied into
    # its slot on the copier's threads while the loop body runs when the loop is left.
    first = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(ring + 4)]
    second = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(ring + 2)]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=ring, backend=backend) as sf:
        kept = _leave_early(sf, first, how)
        if kept is None:
            assert sf.pending == 0 and len(sf._free) == ring + 1  # dropped, and every slot is free
        outputs = list(sf.map(second))
        assert len(outputs) == len(second)  # one output per input, and only its own
        for frame, out in zip(second, outputs):
            np.testing.assert_array_equal(out, cpu(frame))
        if kept is not None:
            with pytest.raises(streamconv.StreamError, match="this map\\(\\) was left"):
                next(kept)


@pytest.mark.parametrize("backend", BACKENDS)
def test_direct_calls_take_over_from_a_suspended_map(rng, backend):
    frames = [rng.integers(0, 256, (16, 20, 3), dtype=np.uint8) for _ in range(6)]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        outputs = sf.map(frames)
        next(outputs)
        assert sf.pending > 0
        sf.submit(frames[5])  # the map's frames in flight are dropped, not handed to result()
        assert sf.pending == 1
        np.testing.assert_array_equal(sf.result(), cpu(frames[5]))
        with pytest.raises(streamconv.StreamError, match="was left"):
            next(outputs)
        draining = sf.map(frames[:2])  # fewer frames than the ring: its outputs come from the drain
        next(draining)
        sf.submit(frames[0])
        with pytest.raises(streamconv.StreamError, match="was left"):
            next(draining)  # not a silent end: its second output was dropped
        with pytest.raises(streamconv.StreamError,
                           match=r"map\(\) with 1 submitted frame\(s\) not yet taken"):
            sf.map(frames)
        np.testing.assert_array_equal(sf.result(), cpu(frames[0]))  # still there after the refusal


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_of_frames_captured_into_input_buffers_keeps_one_output_per_frame(rng, backend,
                                                                              monkeypatch):
    # As examples/opencv_embed.py does: the frame generator captures each frame into
    # input_buffer() while map() runs; that is no take-over, and nothing is copied.
    frames = [rng.integers(0, 256, (18, 26, 3), dtype=np.uint8) for _ in range(7)]
    cpu = streamconv.Filter("emboss", backend="cpu")
    with streamconv.StreamFilter("emboss", ring=2, backend=backend) as sf:
        copies = []
        copy = sf._copier.copy
        monkeypatch.setattr(sf._copier, "copy",
                            lambda dst, src: (copies.append(src.shape), copy(dst, src)))

        def captured():
            for frame in frames:
                buffer = sf.input_buffer(frame.shape)
                buffer[:] = frame  # capture.read(buffer)
                yield buffer

        outputs = list(sf.map(captured()))
    assert len(outputs) == len(frames) and copies == []
    for frame, out in zip(frames, outputs):
        np.testing.assert_array_equal(out, cpu(frame))


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_filters_refuse_every_call(rng, backend):
    frame = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    sf = streamconv.StreamFilter("box:size=3", ring=2, backend=backend)
    outputs = sf.map([frame] * 5)
    next(outputs)
    sf.close()
    sf.close()  # idempotent
    assert sf.closed and sf.pending == 0
    calls = {"submit": lambda: sf.submit(frame), "result": sf.result,
             "map": lambda: sf.map([frame]), "input_buffer": lambda: sf.input_buffer(frame.shape)}
    for name, call in calls.items():
        message = re.escape(f"StreamFilter is closed; {name}() cannot run")
        with pytest.raises(streamconv.StreamError, match=message) as info:
            call()
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(streamconv.StreamError, match="closed"):
        next(outputs)  # the map suspended when close() came
    outputs.close()
    single = streamconv.Filter("box:size=3", backend=backend)
    single.close()
    single.close()
    assert single.closed
    with pytest.raises(streamconv.StreamError, match="Filter is closed"):
        single(frame)
    with pytest.raises(streamconv.StreamError, match="Filter is closed"):
        single.apply_into(np.empty_like(frame), frame)


@pytest.mark.parametrize("make", [streamconv.Filter, streamconv.StreamFilter])
def test_copies_and_pickles_are_refused_and_leave_the_original_working(rng, make):
    # A copy would share the backend's buffers, streams and lock: closing it would free them under
    # the original (which then failed with a bare IndexError, or on the GPU used freed memory).
    frame = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    with make(["scale:w=4,h=-2", "edge"], backend="cpu") as chain:
        name = type(chain).__name__
        for how in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match=f"a {name} cannot be copied or pickled") as info:
                how(chain)
            assert "make a new one" in str(info.value)
        if make is streamconv.Filter:
            result = chain(frame)
        else:
            chain.submit(frame)
            result = chain.result()
        assert result.shape == (4, 4, 3)


@pytest.mark.parametrize("value", [True, False, 2.0, "3", None, [3], 0, -1, np.float64(2)])
def test_ring_must_be_an_integer_not_a_bool(value):
    message = re.escape(f"ring must be an integer from 1 to 64, got {value!r}")
    with pytest.raises(streamconv.SettingsError, match=message):
        streamconv.StreamFilter("identity", ring=value, backend="cpu")


@pytest.mark.parametrize("value", [True, 1.0, "0", -1])
def test_device_must_be_an_integer_not_a_bool(value):
    for make in (streamconv.Filter, streamconv.StreamFilter):
        message = re.escape(f"device must be an integer >= 0, got {value!r}")
        with pytest.raises(streamconv.SettingsError, match=message):
            make("identity", device=value, backend="cpu")


def test_numpy_integers_are_integers():
    with streamconv.StreamFilter("identity", ring=np.int64(2), device=np.uint8(0),
                                 backend="cpu") as sf:
        assert sf.ring == 2 and type(sf.ring) is int


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


@pytest.mark.parametrize("module",
                         ["embed.filter", "embed.streamfilter", "run.pipeline",
                          "io.sources.pattern", "io.sources.arrays", "chain.filters",
                          "chain.presets"])
def test_docstring_examples_run(module):
    failures, tried = doctest.testmod(importlib.import_module(f"streamconv.{module}"),
                                      verbose=False)
    assert tried >= 1 and failures == 0
