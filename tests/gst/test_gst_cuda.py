"""The streamconv GStreamer element on the GPU: frames in flight on the cuda backend (equal to the
CPU reference, the latency query adding the frames held, all drained at EOS) and frames in CUDA
memory filtered where they lie (nvcodec's cudaupload and cudadownload around the element).
Skipped, with the reason, without a GPU or where GStreamer's pipelines cannot run."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.gst import gst, pull_frames, unavailable_reason

import streamconv

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(unavailable_reason() is not None,
                                                   reason=str(unavailable_reason()))]

EXACT = "sharpen"  # integer taps: the GPU equals the CPU reference exactly
WIDTH, HEIGHT, FRAMES = 320, 240, 10


def _push_all(source, frames: list[np.ndarray], caps: str) -> None:
    Gst = gst()
    source.set_property("caps", Gst.Caps.from_string(caps))
    for index, frame in enumerate(frames):
        buffer = Gst.Buffer.new_wrapped(frame.tobytes())
        buffer.pts, buffer.duration = index * Gst.SECOND // 30, Gst.SECOND // 30
        assert source.emit("push-buffer", buffer) == Gst.FlowReturn.OK
    source.emit("end-of-stream")


@pytest.mark.parametrize("depth", [1, 3])
def test_frames_in_flight_on_the_gpu_equal_the_cpu_reference(rng, depth):
    frames = [rng.integers(0, 256, (HEIGHT, WIDTH, 3), np.uint8) for _ in range(FRAMES)]
    Gst = gst()
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time ! streamconv name=s filter={EXACT} backend=cuda "
        f"ring-depth={depth} ! appsink name=out sync=false")
    _push_all(pipeline.get_by_name("src"), frames,
              f"video/x-raw,format=RGB,width={WIDTH},height={HEIGHT},framerate=30/1")
    outputs = pull_frames(pipeline)
    assert len(outputs) == FRAMES  # every frame in flight came out at EOS
    with streamconv.Filter(EXACT, backend="cpu") as reference:
        for (_, data, _), frame in zip(outputs, frames):
            assert np.array_equal(data.reshape(frame.shape), reference(frame))
    stages = pipeline.get_by_name("s").get_property("stats")
    assert stages.get_value("backend").startswith("cuda")
    assert stages.has_field("upload-p50-ms") and stages.has_field("kernel-p50-ms")


def test_the_latency_query_adds_the_frames_in_flight():
    Gst = gst()

    def latency(depth: int) -> int:
        pipeline = Gst.parse_launch(
            "videotestsrc is-live=true ! video/x-raw,format=RGB,width=64,height=48,"
            f"framerate=30/1 ! streamconv filter={EXACT} backend=cuda ring-depth={depth} ! "
            "appsink name=out")
        pipeline.set_state(Gst.State.PLAYING)
        try:
            for _ in range(depth + 2):  # frames through: the caps (and the frame rate) are known
                assert pipeline.get_by_name("out").emit("try-pull-sample", 10 * Gst.SECOND)
            query = Gst.Query.new_latency()
            assert pipeline.query(query)
            return query.parse_latency()[1]
        finally:
            pipeline.set_state(Gst.State.NULL)

    assert latency(3) - latency(1) == 2 * Gst.SECOND // 30


def test_cuda_memory_is_filtered_where_it_lies(rng):
    Gst = gst()
    if Gst.ElementFactory.find("cudaupload") is None:
        pytest.skip("GStreamer's nvcodec elements (cudaupload, cudadownload) are not here")
    frames = [rng.integers(0, 256, (HEIGHT, WIDTH, 4), np.uint8) for _ in range(FRAMES)]
    caps = f"format=RGBA,width={WIDTH},height={HEIGHT},framerate=30/1"
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time ! cudaupload ! video/x-raw(memory:CUDAMemory),{caps} ! "
        f"streamconv name=s filter={EXACT} backend=cuda ring-depth=3 ! cudadownload ! "
        f"video/x-raw,{caps} ! appsink name=out sync=false")
    _push_all(pipeline.get_by_name("src"), frames, f"video/x-raw,{caps}")
    outputs = pull_frames(pipeline)
    assert len(outputs) == FRAMES
    with streamconv.Filter(EXACT, backend="cpu") as reference:
        for (_, data, _), frame in zip(outputs, frames):
            assert np.array_equal(data.reshape(frame.shape), reference(frame))
    stages = pipeline.get_by_name("s").get_property("stats")
    assert stages.get_value("frames") == FRAMES and stages.has_field("latency-p50-ms")
    assert not stages.has_field("read-p50-ms") and not stages.has_field("upload-p50-ms")  # no copy
