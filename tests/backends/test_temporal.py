"""Stages across frames on the CPU backend: the float64 oracle, every border, 8 and 16 bits,
frame count and order, the delay, the flush, causal forms, chains with 2-D stages, the API."""

from __future__ import annotations

import numpy as np
import pytest

import streamconv
from streamconv.errors import FilterSpecError, StreamconvError
from streamconv.chain.filters import FilterStage, parse_chain, parse_filter
from streamconv.io.sources.arrays import ArraySource
from streamconv.io.sinks.sink import CallbackSink
from streamconv.chain.temporal import validate_taps3d

from helpers.oracle import exact_for, reference_clip
from helpers.temporal import clip_of, drive, random_taps3d

BORDERS = ("zero", "replicate", "reflect101")


def conv3d(taps: np.ndarray, causal: bool = False) -> FilterStage:
    return FilterStage("conv3d", {}, (), temporal=validate_taps3d(taps, causal=causal))


def stream(clip: np.ndarray, stages, border: str, ring: int = 2) -> np.ndarray:
    """The clip through StreamFilter on the CPU: submit every frame, flush, take every result."""
    with streamconv.StreamFilter(list(stages), ring=ring, border=border, backend="cpu") as sf:
        got = [out.copy() for out in sf.map(clip)]
    return np.stack(got)


def check_against_oracle(got: np.ndarray, clip: np.ndarray, stages, border: str) -> None:
    """Equal to the float64 oracle where every tap is exact, else within 1 LSB."""
    expected = reference_clip(clip, stages, border)
    exact = all(exact_for(np.asarray(s.temporal.taps if s.temporal is not None else s.taps[0]),
                          np.iinfo(clip.dtype).max) for s in stages)
    difference = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    assert difference.max() <= (0 if exact else 1), (difference.max(), exact)


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("exact", [True, False])
def test_random_3d_taps_match_the_oracle(rng, border, dtype, exact):
    stage = conv3d(random_taps3d(rng, 3, 3, exact=exact))
    clip = clip_of(rng, 6, dtype=dtype)
    check_against_oracle(stream(clip, [stage], border), clip, [stage], border)


@pytest.mark.parametrize("spec", ["tmean:frames=5", "tgauss:sigma=1", "tdiff",
                                  "tdiff:causal=1,scale=4", "tdenoise:frames=3",
                                  "tmean:frames=3,causal=1", "tgauss:sigma=2,causal=1"])
def test_named_filters_match_the_oracle(rng, spec):
    stages = parse_chain([spec])
    clip = clip_of(rng, 7)
    check_against_oracle(stream(clip, stages, "reflect101"), clip, stages, "reflect101")


def test_time_only_taps_are_bit_exact_with_float32_order(rng):
    """K = 1: the reference is w0 f0 + w1 f1 + ... each rounded to float32 (what the GPU's time
    kernel repeats); against float64 it may differ by 1 at most, never more."""
    taps = rng.uniform(-0.5, 1.0, (5, 1, 1))
    stage = conv3d(taps)
    clip = clip_of(rng, 9, dtype=np.uint16)
    got = stream(clip, [stage], "zero")
    frames = clip.astype(np.float32)
    expected = np.empty_like(clip)
    for t in range(9):
        index = [min(max(t + k - 2, 0), 8) for k in range(5)]
        acc = frames[index[0]] * np.float32(taps[0, 0, 0])
        for k in range(1, 5):
            acc = acc + frames[index[k]] * np.float32(taps[k, 0, 0])
        expected[t] = np.clip(np.rint(acc), 0, 65535)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_every_frame_comes_out_once_in_order_short_clips_included(rng, count):
    stages = parse_chain(["gaussian", "tmean:frames=5", "sharpen", "tgauss:sigma=1,frames=3",
                          "box"])
    clip = clip_of(rng, count)
    got = stream(clip, stages, "replicate", ring=1)
    assert got.shape == clip.shape
    check_against_oracle(got, clip, stages, "replicate")


def test_pipeline_keeps_count_timestamps_and_reports_the_delay(rng):
    clip = clip_of(rng, 8)
    stages = parse_chain(["tmean:frames=5", "box", "tdiff"])
    got, metas = [], []
    sink = CallbackSink(lambda frame, meta: (got.append(frame.copy()), metas.append(meta)))
    stats = streamconv.Pipeline(ArraySource(list(clip)), stages, sink, backend="cpu", ring=2).run()
    assert [m.index for m in metas] == list(range(8)) and stats.frames == 8
    assert stats.delay_frames == 3 and stats.to_dict()["delay_frames"] == 3
    check_against_oracle(np.stack(got), clip, stages, "reflect101")


def test_causal_chain_adds_no_delay_and_reads_only_the_past(rng):
    clip = clip_of(rng, 6)
    stages = parse_chain(["tmean:frames=3,causal=1"])
    with streamconv.StreamFilter(stages, ring=1, backend="cpu") as sf:
        sf.submit(clip[0])
        first = sf.result()  # at once: no frame after it is needed
        sf.submit(clip[1])
        second = sf.result()
    np.testing.assert_array_equal(first, clip[0])  # frames before the first are the first
    expected = (2 * clip[0].astype(np.float32) / 3 + clip[1] / np.float32(3))
    assert np.abs(second.astype(int) - np.rint(expected)).max() <= 1
    assert sf.pending == 0


def test_stream_filter_result_waits_for_the_window_and_flush_ends_the_stream(rng):
    clip = clip_of(rng, 3)
    stages = parse_chain(["tmean:frames=5"])
    with streamconv.StreamFilter(stages, ring=3, backend="cpu") as sf:
        sf.submit(clip[0])
        with pytest.raises(StreamconvError, match="2 more frame"):
            sf.result()
        sf.submit(clip[1])
        sf.flush()
        outputs = [sf.result(), sf.result()]
        assert sf.pending == 0
        sf.submit(clip[2])  # a new stream: frames of the last one are not read
        sf.flush()
        np.testing.assert_array_equal(sf.result(), clip[2])
    check_against_oracle(np.stack(outputs), clip[:2], stages, "reflect101")


@pytest.mark.parametrize("chain", [["tmean:frames=3,causal=1"],
                                   ["tgauss:sigma=1,causal=1", "edge", "tdiff:causal=1"]])
def test_flush_ends_the_stream_of_a_chain_of_causal_stages_too(rng, chain):
    """A chain of causal stages owes no output at flush() (its delay is 0), but it holds the frames
    before: flush() kept them, and the next stream's first outputs read the last one's frames."""
    first, second = clip_of(rng, 3), clip_of(rng, 3)
    stages = parse_chain(chain)
    with streamconv.StreamFilter(stages, backend="cpu") as sf:
        for frame in first:
            sf.submit(frame)
            sf.result()
        sf.flush()
        outputs = []
        for frame in second:
            sf.submit(frame)
            outputs.append(sf.result())
    with streamconv.StreamFilter(stages, backend="cpu") as fresh:
        expected = list(fresh.map(second))
    assert all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))


def test_result_says_how_many_more_frames_the_first_output_needs(rng):
    """Output 0 of a chain 10 frames behind needs frames 0..10: after k frames, 11 - k more."""
    clip = clip_of(rng, 11)
    with streamconv.StreamFilter(["tmean:frames=15", "tgauss:sigma=1"], ring=2,
                                 backend="cpu") as sf:
        for count, frame in enumerate(clip[:10], 1):
            sf.submit(frame)
            with pytest.raises(StreamconvError, match=rf"waits for {11 - count} more frame"):
                sf.result()
        sf.submit(clip[10])
        assert sf.result().shape == clip[0].shape


def test_map_after_submits_a_window_still_holds_says_to_flush_them(rng):
    """map() refused frames submitted and not yet taken with "take them with result() first";
    with a chain across frames result() cannot take them until flush() (it raised again)."""
    clip = clip_of(rng, 4)
    with streamconv.StreamFilter(["tmean:frames=5"], ring=3, backend="cpu") as sf:
        sf.submit(clip[0])
        sf.submit(clip[1])
        with pytest.raises(streamconv.StreamError, match=r"flush\(\) and take them with result"):
            sf.map(clip)
        sf.flush()
        assert [out.shape for out in (sf.result(), sf.result())] == [clip[0].shape] * 2
        assert len(list(sf.map(clip))) == 4


@pytest.mark.parametrize("chain, delay", [(["tmean:frames=5", "tdiff"], 3), (["edge"], 0),
                                          (["tgauss:sigma=1,causal=1"], 0)])
def test_stream_filter_tells_its_delay_so_submit_and_result_can_keep_pace(rng, chain, delay):
    """The docs say results come ``delay`` frames later; a caller driving submit()/result() by
    hand reads it off the StreamFilter, not off its backend's private engine."""
    clip = clip_of(rng, 6)
    with streamconv.StreamFilter(chain, backend="cpu") as sf:
        assert sf.delay == delay
        outputs = []
        for frame in clip:
            sf.submit(frame)
            if sf.pending > sf.delay:
                outputs.append(sf.result())
        assert len(outputs) == len(clip) - delay
        sf.flush()
        while sf.pending:
            outputs.append(sf.result())
        expected = list(sf.map(clip))
    assert all(np.array_equal(a, b) for a, b in zip(outputs, expected, strict=True))


def test_a_new_frame_size_or_dtype_ends_the_stream_as_flush_does(rng):
    """Frames of another (H, W, C) or dtype cannot share a window: the frames before are put out
    as at a flush(), ends repeated, and a new stream begins; (H, W) and (H, W, 1) are one."""
    clip = clip_of(rng, 3)
    other = clip_of(rng, 2)[:, :5, :4]
    with streamconv.StreamFilter(["tmean:frames=3"], backend="cpu") as sf:
        outputs = list(sf.map([*clip, *other, *clip.astype(np.uint16)]))
        parts = [list(sf.map(part)) for part in (clip, other, clip.astype(np.uint16))]
    assert [out.dtype for out in outputs] == [np.uint8] * 5 + [np.uint16] * 3
    assert all(np.array_equal(a, b) for a, b in zip(outputs, sum(parts, []), strict=True))


def test_filter_refuses_a_temporal_chain_and_points_at_stream_filter():
    with pytest.raises(FilterSpecError, match="StreamFilter"):
        streamconv.Filter(["box", "tmean"], backend="cpu")
    # a causal stage reads the frames before the output frame only: "around it" would say the
    # opposite of what causal=1 is for
    with pytest.raises(FilterSpecError, match="needs the frames before it") as info:
        streamconv.Filter(["tmean:frames=3,causal=1"], backend="cpu")
    assert "around" not in str(info.value) and "StreamFilter" in str(info.value)


@pytest.mark.parametrize("spec, message", [
    ("conv3d:taps=1|1", "T must be odd"),
    ("conv3d:taps=1,1;1,1|1,1;1,1|1,1;1,1", "odd square"),
    ("tmean:frames=17", "frames must be odd"),
    ("tgauss:sigma=3", "needs 19 frames"),
    ("conv3d:taps=1|nan|1", "NaN"),
    ("conv3d:file=taps.txt", ".npy"),
    ("conv3d", "exactly one"),
    ("tgauss:sigma=1e308", "needs inf frames"),
    ("tdenoise:sigma=1e308", "needs inf frames"),
    ("tdenoise:space=1e308", r"space=1e\+308 needs inf"),
    ("tdiff:scale=1e39", r"tdiff: \|tap\| = 5e\+38 exceeds 1e\+06"),
    ("tdiff:scale=-1e7", r"tdiff: \|tap\| = 5e\+06 exceeds 1e\+06"),
])
def test_bad_temporal_specs_are_refused(spec, message):
    with pytest.raises(FilterSpecError, match=message):
        parse_filter(spec)


@pytest.mark.parametrize("spec", ["tdiff:scale=0", "tdiff:scale=1e-50", "conv3d:taps=0|0|0",
                                  "conv3d:taps=0,0,0;0,0,0;0,0,0|0,0,0;0,0,0;0,0,0|"
                                  "0,0,0;0,0,0;0,0,0,causal=1"])
def test_all_zero_taps_give_one_black_frame_per_frame(rng, spec):
    """Taps that are all zero (or round to zero in float32) leave no window position to read;
    every output is still there, and 0."""
    stages = parse_chain([spec])
    assert stages[0].temporal.used == ()
    clip = clip_of(rng, 4)
    got = stream(clip, stages, "reflect101")
    assert got.shape == clip.shape
    np.testing.assert_array_equal(got, np.zeros_like(clip))


@pytest.mark.parametrize("spec", ["tgauss:sigma=1e308,frames=3", "tdenoise:sigma=1e308,frames=3",
                                  "tgauss:sigma=1e308,frames=3,causal=1"])
def test_a_huge_sigma_with_given_frames_is_a_flat_window(spec):
    """A Gaussian far wider than its window weighs every frame alike (1/T)."""
    time = parse_filter(spec).temporal.time
    np.testing.assert_array_equal(time, np.full(3, 1 / 3, np.float32))


def test_tdiff_takes_a_scale_up_to_the_tap_limit():
    """The largest tap allowed, as for 2-D taps and conv3d (MAX_ABS_TAP), is still built."""
    np.testing.assert_array_equal(parse_filter("tdiff:scale=2e6").temporal.time, [-1e6, 0, 1e6])


def test_conv3d_reads_a_npy_file_and_finds_separable_taps(tmp_path, rng):
    taps = np.outer([1.0, 2.0, 1.0], [0.25, 0.5, 0.25]).reshape(3, 1, 3)
    taps = taps[:, :, :, None] * np.array([0.25, 0.5, 0.25])[None, None, None, :]
    path = tmp_path / "taps.npy"
    np.save(path, taps.reshape(3, 3, 3) / 4)
    stage = parse_filter(f"conv3d:file={path}")
    assert stage.temporal.taps.shape == (3, 3, 3) and stage.temporal.time is not None
    np.testing.assert_array_equal(stage.temporal.time[:, None, None] * stage.temporal.space[None],
                                  stage.temporal.taps)
    assert conv3d(random_taps3d(rng, 3, 3, exact=False)).temporal.time is None
    assert "3x3 x 3 frames" in stage.describe()


def test_the_cpu_backend_driven_slot_by_slot_equals_stream_filter(rng):
    from streamconv.backends import create_backend

    stages = parse_chain(["box", "tmean:frames=3", "tgauss:sigma=1,frames=5"])
    clip = clip_of(rng, 6)
    with create_backend("cpu", stages) as backend:
        got = drive(backend, clip, 2)
    np.testing.assert_array_equal(got, stream(clip, stages, "reflect101"))


def test_scale_and_a_stage_across_frames_in_one_chain_are_refused():
    with pytest.raises(FilterSpecError, match="scale and crop"):
        streamconv.StreamFilter(["scale:w=8,h=6", "tmean"], backend="cpu")
