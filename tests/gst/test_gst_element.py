"""The streamconv GStreamer element in real pipelines: gst-launch-1.0 through GST_PLUGIN_PATH (the
frames equal streamconv.Filter's on the same decoded frames, and the CLI's bytes on I420), its
errors as GStreamer errors, and in-process pipelines for a live source's latency, a size change,
EOS and a flushing seek, and an error mid-stream. Skipped, with the reason, where GStreamer's
Python plugin loader runs another Python than the tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import REPO, run_cli
from helpers.clips import write_clip
from helpers.gst import (
                         bus_error,
                         environment_packages,
                         gi_folder,
                         gst,
                         gst_launch,
                         gst_tool,
                         launch_environment,
                         pull_frames,
                         sample_frame,
                         skip_without_gstreamer,
                         unavailable_reason,
                         )

import streamconv
from streamconv.backends import cuda_status
from streamconv.gst.cuda_memory import mapped_address
from streamconv.gst.engine import HostRing

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

CHAIN = "gaussian:sigma=1.5 -> sharpen"
SPECS = ["gaussian:sigma=1.5", "sharpen"]
WIDTH, HEIGHT, FRAMES = 96, 64, 12


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """A 12-frame 96x64 H.264 clip of moving random pictures."""
    skip_without_gstreamer()
    if gst_tool("inspect", "avdec_h264").returncode != 0:
        pytest.skip("no H.264 decoder in GStreamer here (gstreamer1.0-libav)")
    return write_clip(
        tmp_path_factory.mktemp("gst") / "clip.mp4", frames=FRAMES, size=(WIDTH, HEIGHT)
    )


@pytest.fixture(params=["cpu", "held"])
def holding(request, monkeypatch) -> int:
    """How many frames the element keeps in flight: 1 as on the cpu backend, or 3 ("held") as on
    the cuda backend, whose asynchrony is played here by a ring that lets a frame go only when full
    (the element's holding, draining, flushing and latency then run as they do on a GPU). Returns
    the frames in flight."""
    if request.param == "cpu":
        return 1
    from streamconv.gst import element

    monkeypatch.setattr(element, "frames_in_flight", lambda backend, depth: depth)
    monkeypatch.setattr(HostRing, "ready", lambda ring: ring.queued >= ring.in_flight)
    return 3


def _frames(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    data = np.fromfile(path, np.uint8)
    return data.reshape(-1, *shape)


def test_gst_inspect_lists_the_element_with_every_property():
    gst()  # the system's gi on the path: the property table imports it
    from streamconv.gst.properties import PROPERTIES

    result = gst_tool("inspect", "streamconv")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in [*PROPERTIES, "qos"]:
        assert re.search(rf"^  {name}\s+:", result.stdout, re.MULTILINE), name
    assert "video/x-raw(memory:CUDAMemory)" in result.stdout
    for fmt in ("RGB", "GRAY16_LE", "I420", "NV12", "P010_10LE"):
        assert f"(string){fmt}" in result.stdout


def test_an_element_that_cannot_load_says_why_in_one_line(tmp_path):
    """streamconv installed for another Python than GStreamer's: the loader says so, no
    traceback."""
    site_packages = tmp_path / "lib" / "python3.99" / "site-packages"
    shutil.copytree(REPO / "streamconv", site_packages / "streamconv",
                    ignore=shutil.ignore_patterns("__pycache__"))
    environment = dict(launch_environment(), PYTHONPATH="",
                       GST_REGISTRY=str(tmp_path / "registry.bin"),
                       GST_PLUGIN_PATH=str(site_packages / "streamconv" / "gst" / "plugin"))
    result = subprocess.run(["gst-inspect-1.0", "streamconv"], capture_output=True, text=True,
                            timeout=120, env=environment, check=False)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("streamconv:")]
    assert len(lines) >= 1 and "the GStreamer element is unavailable" in lines[0]
    assert "installed for python3.99" in lines[0]
    assert "Traceback" not in result.stderr


def test_a_file_pipeline_gives_filters_frames_and_a_playable_mp4(clip, tmp_path):
    """filesrc ! decodebin ! videoconvert ! streamconv ! x264enc ! mp4mux ! filesink, the decoded
    frames and the filtered ones also written raw beside it (tees)."""
    decoded, filtered, encoded = tmp_path / "in.rgb", tmp_path / "out.rgb", tmp_path / "out.mp4"
    result = gst_launch(
        f"filesrc location={clip} ! decodebin ! videoconvert ! video/x-raw,format=RGB ! tee name=t "
        f"t. ! queue ! filesink location={decoded} "
        f"t. ! queue ! streamconv filter='{CHAIN}' backend=cpu ! tee name=o "
        f"o. ! queue ! filesink location={filtered} "
        f"o. ! queue ! videoconvert ! x264enc ! mp4mux ! filesink location={encoded}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    inputs, outputs = _frames(decoded, (HEIGHT, WIDTH, 3)), _frames(filtered, (HEIGHT, WIDTH, 3))
    assert len(inputs) == len(outputs) == FRAMES
    with streamconv.Filter(SPECS, backend="cpu") as reference:
        for number, (frame, output) in enumerate(zip(inputs, outputs)):
            assert np.array_equal(output, reference(frame)), f"frame {number}"
    assert not np.array_equal(inputs, outputs)
    with av.open(str(encoded)) as container:
        pictures = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(pictures) == FRAMES and pictures[0].shape == (HEIGHT, WIDTH, 3)


def test_i420_through_the_element_equals_the_cli_byte_for_byte(clip, tmp_path):
    """The element's planes path and ``streamconv run``'s (the same integer colour conversion)."""
    element_out, cli_out = tmp_path / "element.yuv", tmp_path / "cli.yuv"
    result = gst_launch(
        f"filesrc location={clip} ! decodebin ! videoconvert ! video/x-raw,format=I420 ! "
        f"streamconv filter='{CHAIN}' backend=cpu ! filesink location={element_out}")
    assert result.returncode == 0, result.stdout + result.stderr
    cli = run_cli(*f"run {clip} -o {cli_out} --format rawvideo --codec rawvideo --pix-fmt yuv420p "
                   f"--colour backend --backend cpu --filter {SPECS[0]} "
                   f"--filter {SPECS[1]}".split())
    assert cli.returncode == 0, cli.stderr
    ours, theirs = element_out.read_bytes(), cli_out.read_bytes()
    assert len(ours) == FRAMES * WIDTH * HEIGHT * 3 // 2
    assert ours == theirs


def test_the_example_program_runs_its_pipeline(clip, tmp_path):
    output = tmp_path / "filtered.mp4"
    paths = [str(REPO), str(gi_folder()), *environment_packages()]
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "gstreamer_pipeline.py"), str(clip), str(output),
         "--filter", CHAIN, "--backend", "cpu"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)), check=False)
    assert result.returncode == 0, result.stderr
    assert f"filtered {FRAMES} frames with {CHAIN} on cpu" in result.stdout
    with av.open(str(output)) as container:
        assert sum(1 for _ in container.decode(video=0)) == FRAMES


ERRORS = {
    "unknown-filter": ("videotestsrc num-buffers=3 ! streamconv filter=nosuch ! fakesink",
                       "unknown filter 'nosuch'"),
    "odd-i420": (("videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=63,height=47 ! "
                  "streamconv filter=box backend=cpu ! fakesink"), "need an even width and height"),
    "no-gpu": ("videotestsrc num-buffers=3 ! streamconv filter=box backend=cuda ! fakesink",
               "cuda backend unavailable"),
    "a-size-change": (("videotestsrc num-buffers=3 ! streamconv backend=cpu "
                       "filter='box -> scale:w=32,h=24' ! fakesink"),
                      "scale:w=32,h=24,kernel=lanczos3: the element filters each frame in place, "
                      "at its size; change the size with videoscale or videocrop beside it"),
}


@pytest.mark.parametrize("pipeline, message", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_are_gstreamer_errors_with_streamconvs_message(pipeline, message):
    if "backend=cuda" in pipeline and cuda_status(0)[0]:
        pytest.skip("a GPU is usable here: no error to see")
    result = gst_launch(pipeline)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert re.search(
        r"ERROR: from element /GstPipeline:pipeline0/GstStreamconv:streamconv0: .*"
        + re.escape(message),
        output,
    ), output
    assert "Traceback" not in output


def _appsrc_pipeline(element: str = "streamconv name=s filter=box:size=3 backend=cpu"):
    Gst = gst()
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time ! {element} ! appsink name=out sync=false"
    )
    return pipeline, pipeline.get_by_name("src")


def _push(source, frame: np.ndarray, caps: str, index: int) -> None:
    Gst = gst()
    source.set_property("caps", Gst.Caps.from_string(caps))
    buffer = Gst.Buffer.new_wrapped(frame.tobytes())
    buffer.pts, buffer.duration = index * Gst.SECOND // 25, Gst.SECOND // 25
    assert source.emit("push-buffer", buffer) == Gst.FlowReturn.OK


def _set_before_frames(element, changes: dict[int, tuple[str, str]]) -> None:
    """Set ``changes[n]`` (property, value) of ``element`` just before its frame n (from 1)
    reaches it, in the streaming thread (a pad probe), as an application's thread would set it
    between two frames."""
    Gst = gst()
    seen = []

    def before_frame(_pad, _info):
        seen.append(1)
        if len(seen) in changes:
            element.set_property(*changes[len(seen)])
        return Gst.PadProbeReturn.OK

    element.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, before_frame)


def test_a_size_and_format_change_mid_stream_is_renegotiated(rng, holding):
    small = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(3)]
    large = [rng.integers(0, 65536, (60, 80), np.uint16) for _ in range(3)]
    pipeline, source = _appsrc_pipeline()
    for index, frame in enumerate(small):
        _push(source, frame, "video/x-raw,format=RGB,width=64,height=48,framerate=25/1", index)
    for index, frame in enumerate(large, start=3):
        _push(
            source, frame, "video/x-raw,format=GRAY16_LE,width=80,height=60,framerate=25/1", index
        )
    source.emit("end-of-stream")
    outputs = pull_frames(pipeline)
    assert len(outputs) == 6
    with streamconv.Filter("box:size=3", backend="cpu") as reference:
        for (_, data, caps), frame in zip(outputs, small + large):
            assert np.array_equal(data.view(frame.dtype).reshape(frame.shape), reference(frame)), (
                caps
            )
    assert "width=(int)80" in outputs[-1][2] and "GRAY16_LE" in outputs[-1][2]
    assert pipeline.get_by_name("s").get_property("frames") == 6


@pytest.mark.parametrize("chain", ["box:size=3 -> tmean:frames=5 -> sharpen", "tdiff"])
def test_filters_across_frames_put_each_output_in_its_own_frames_buffer(rng, holding, chain):
    """Frame i's output leaves in frame i's buffer once the frames after it have come, with its
    timestamp; EOS flushes the tail (edge frames repeated) and new caps start a new window, here
    one shorter than the window, of 16-bit frames: the same frames as StreamFilter's."""
    colour = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(7)]
    grey = [rng.integers(0, 65536, (30, 40), np.uint16) for _ in range(2)]
    pipeline, source = _appsrc_pipeline(f"streamconv name=s filter=\"{chain}\" backend=cpu "
                                        f"ring-depth={holding}")
    for index, frame in enumerate(colour):
        _push(source, frame, "video/x-raw,format=RGB,width=64,height=48,framerate=25/1", index)
    for index, frame in enumerate(grey, start=len(colour)):
        _push(source, frame, "video/x-raw,format=GRAY16_LE,width=40,height=30,framerate=25/1",
              index)
    source.emit("end-of-stream")
    outputs = pull_frames(pipeline)
    Gst = gst()
    assert [pts for pts, _, _ in outputs] == [i * Gst.SECOND // 25 for i in range(9)]
    for frames in (colour, grey):
        with streamconv.StreamFilter(chain.split(" -> "), backend="cpu") as reference:
            wanted = list(reference.map(frames))
        got, outputs = outputs[:len(frames)], outputs[len(frames):]
        for (_, data, caps), frame, want in zip(got, frames, wanted):
            assert np.array_equal(data.view(frame.dtype).reshape(frame.shape), want), caps
    assert pipeline.get_by_name("s").get_property("frames") == 9


def test_filters_across_frames_add_their_look_ahead_to_the_latency(holding):
    """A centred 5-frame window holds each frame until 2 more have come: 2 frame durations more."""
    Gst = gst()
    source = ("videotestsrc is-live=true ! video/x-raw,format=RGB,width=64,height=48,"
              "framerate=30/1 ! ")
    live, least, most, _ = _latency(source + "identity ! appsink name=out")
    with_element = _latency(
        source + "streamconv filter=tmean:frames=5 backend=cpu ring-depth=3 ! appsink name=out"
    )
    added = (holding - 1 + 2) * (Gst.SECOND // 30)
    assert live and with_element[0] and with_element[1] == least + added


def test_frames_are_filtered_in_place(rng, holding):
    """The memory a frame comes in is the memory it goes out in (no buffer of the element's own).

    A buffer is writable in place only while the element holds its one reference: appsrc's thread
    is held back until every push has returned and the test's own references are gone, or a
    buffer reaching the element while ``push-buffer`` still holds it would be copied, as any
    in-place GStreamer element must do then."""
    Gst = gst()
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(4)]
    pipeline = Gst.parse_launch(f"appsrc name=src format=time ! streamconv name=s "
                                f"filter=box:size=3 backend=cpu ring-depth={holding} ! "
                                "fakesink name=out sync=false")
    addresses: dict[str, list[int]] = {"sink": [], "src": []}

    def record(pad, info):
        ok, mapping = info.get_buffer().map(Gst.MapFlags.READ)
        addresses[pad.get_name()].append(mapped_address(mapping.data))
        info.get_buffer().unmap(mapping)
        return Gst.PadProbeReturn.OK

    element = pipeline.get_by_name("s")
    for pad in ("sink", "src"):
        element.get_static_pad(pad).add_probe(Gst.PadProbeType.BUFFER, record)
    source = pipeline.get_by_name("src")
    source_pad = source.get_static_pad("src")
    held = source_pad.add_probe(Gst.PadProbeType.BLOCK_DOWNSTREAM,
                                lambda _pad, _info: Gst.PadProbeReturn.OK)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        for index, frame in enumerate(frames):
            _push(source, frame, "video/x-raw,format=RGB,width=64,height=48,framerate=25/1", index)
        source.emit("end-of-stream")
        source_pad.remove_probe(held)
        message = pipeline.get_bus().timed_pop_filtered(
            10 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
        assert message is not None and message.type == Gst.MessageType.EOS, bus_error(pipeline)
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert len(addresses["src"]) == 4 and addresses["src"] == addresses["sink"]


def test_a_filter_changed_while_playing_takes_the_next_frame(rng, holding):
    """The frames before the change (also those still in flight) keep the old chain. The change is
    made in the streaming thread just before the fourth frame reaches the element (a pad probe),
    as an application's thread would make it between two frames."""
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(6)]
    caps = "video/x-raw,format=RGB,width=64,height=48,framerate=25/1"
    pipeline, source = _appsrc_pipeline(f"streamconv name=s filter=box:size=3 backend=cpu "
                                        f"ring-depth={holding}")
    Gst = gst()
    _set_before_frames(pipeline.get_by_name("s"), {4: ("filter", "preset:emboss")})
    pipeline.set_state(Gst.State.PLAYING)
    try:
        for index, frame in enumerate(frames):
            _push(source, frame, caps, index)
        source.emit("end-of-stream")
        outputs = pull_frames(pipeline)
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert len(outputs) == 6
    box = streamconv.Filter("box:size=3", backend="cpu")
    emboss = streamconv.Filter(["box:size=3", "emboss"], border="replicate", backend="cpu")
    for number, ((_, data, _), frame) in enumerate(zip(outputs, frames)):
        reference = box if number < 3 else emboss
        assert np.array_equal(data.reshape(frame.shape), reference(frame)), number


def test_a_filter_that_fails_mid_stream_ends_it_with_its_message(rng, capfd):
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(4)]
    caps = "video/x-raw,format=RGB,width=64,height=48,framerate=25/1"
    pipeline, source = _appsrc_pipeline()
    Gst = gst()
    sink = pipeline.get_by_name("out")
    pipeline.set_state(Gst.State.PLAYING)
    try:
        for index, frame in enumerate(frames[:3]):
            _push(source, frame, caps, index)
        outputs = [sample_frame(sink.emit("try-pull-sample", 10 * Gst.SECOND)) for _ in range(3)]
        pipeline.get_by_name("s").set_property("filter", "nosuch")
        _push(source, frames[3], caps, 3)
        message = pipeline.get_bus().timed_pop_filtered(10 * Gst.SECOND, Gst.MessageType.ERROR)
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert message is not None
    assert "unknown filter 'nosuch'" in message.parse_error()[0].message
    with streamconv.Filter("box:size=3", backend="cpu") as reference:
        for (_, data, _caps), frame in zip(outputs, frames):
            assert np.array_equal(data.reshape(frame.shape), reference(frame))
    assert "Traceback" not in capfd.readouterr().err


def test_cuda_memory_without_the_cuda_backend_is_refused(rng):
    pipeline, source = _appsrc_pipeline()
    Gst = gst()
    pipeline.set_state(Gst.State.PLAYING)
    try:
        source.set_property(
            "caps",
            Gst.Caps.from_string(
                "video/x-raw(memory:CUDAMemory),format=RGBA,width=16,height=16,framerate=25/1"
            ),
        )
        source.emit("push-buffer", Gst.Buffer.new_wrapped(bytes(16 * 16 * 4)))
        message = pipeline.get_bus().timed_pop_filtered(10 * Gst.SECOND, Gst.MessageType.ERROR)
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert message is not None
    assert "frames in CUDA memory need the cuda backend" in message.parse_error()[0].message


def _latency(description: str) -> tuple[bool, int, int, list]:
    """Play a live pipeline until 5 frames came out of each appsink, ask its latency; returns
    (live, min, max, [(pts, frame, caps)] of each appsink by name)."""
    Gst = gst()
    pipeline = Gst.parse_launch(description)
    sinks = [element for element in pipeline.iterate_sinks()]
    pipeline.set_state(Gst.State.PLAYING)
    try:
        taken = {
            sink.get_name(): [
                sample_frame(sink.emit("try-pull-sample", 10 * Gst.SECOND)) for _ in range(5)
            ]
            for sink in sinks
        }
        query = Gst.Query.new_latency()
        assert pipeline.query(query), bus_error(pipeline)
        live, least, most = query.parse_latency()
    finally:
        pipeline.set_state(Gst.State.NULL)
    return live, least, most, taken


def test_a_live_source_is_filtered_and_its_latency_answered(holding):
    """videotestsrc is-live=true: the latency query goes through the element, which adds the frames
    it holds (none on the cpu backend: each frame leaves as it is filtered)."""
    Gst = gst()
    source = (
        "videotestsrc is-live=true pattern=ball ! video/x-raw,format=RGB,width=64,height=48,"
        "framerate=30/1 ! tee name=t ! queue ! appsink name=raw t. ! queue ! "
    )
    live, least, most, _ = _latency(source + "identity ! appsink name=out")
    with_element = _latency(
        source + "streamconv filter=box:size=3 backend=cpu ring-depth=3 ! appsink name=out"
    )
    assert live and with_element[0]
    added = (holding - 1) * Gst.SECOND // 30 if holding > 1 else 0
    assert least > 0 and with_element[1] == least + added
    assert with_element[2] == (most if most == Gst.CLOCK_TIME_NONE else most + added)
    frames = with_element[3]
    by_time = {pts: data for pts, data, _ in frames["raw"]}
    with streamconv.Filter("box:size=3", backend="cpu") as reference:
        for pts, data, _ in frames["out"]:
            frame = by_time[pts].reshape(48, 64, 3)
            assert np.array_equal(data.reshape(48, 64, 3), reference(frame))


def _decoded_by_time(clip: Path) -> dict[int, np.ndarray]:
    Gst = gst()
    pipeline = Gst.parse_launch(
        f"filesrc location={clip} ! decodebin ! videoconvert ! "
        "video/x-raw,format=RGB ! appsink name=out sync=false"
    )
    return {pts: data.reshape(HEIGHT, WIDTH, 3) for pts, data, _ in pull_frames(pipeline)}


def test_a_flushing_seek_and_eos_through_the_element(clip, holding):
    Gst = gst()
    decoded = _decoded_by_time(clip)
    assert len(decoded) == FRAMES
    pipeline = Gst.parse_launch(
        f"filesrc location={clip} ! decodebin ! videoconvert ! video/x-raw,format=RGB "
        f'! streamconv name=s filter="{CHAIN}" backend=cpu ring-depth={holding} ! appsink '
        "name=out sync=false"
    )
    sink = pipeline.get_by_name("out")
    pipeline.set_state(Gst.State.PAUSED)
    try:
        assert pipeline.get_state(10 * Gst.SECOND)[0] == Gst.StateChangeReturn.SUCCESS, bus_error(
            pipeline
        )
        first = sample_frame(sink.emit("try-pull-preroll", 10 * Gst.SECOND))
        target = sorted(decoded)[FRAMES // 2]
        assert pipeline.seek_simple(
            Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.ACCURATE, target
        )
        pipeline.set_state(Gst.State.PLAYING)
        after = []
        while (sample := sink.emit("try-pull-sample", 10 * Gst.SECOND)) is not None:
            after.append(sample_frame(sample))
        assert sink.get_property("eos"), bus_error(pipeline) or "no EOS"
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert [pts for pts, _, _ in after] == sorted(decoded)[FRAMES // 2 :]
    with streamconv.Filter(SPECS, backend="cpu") as reference:
        for pts, data, _ in [first, *after]:
            assert np.array_equal(data.reshape(HEIGHT, WIDTH, 3), reference(decoded[pts])), pts


def test_late_frames_are_skipped_and_counted(rng):
    """QoS: a sink that sees every frame late (an identity sleeping 80 ms a frame behind the element
    on a live 30 fps source) makes the element skip frames already late, and count them."""
    Gst = gst()
    pipeline = Gst.parse_launch(
        "videotestsrc is-live=true ! video/x-raw,format=RGB,width=64,height=48,framerate=30/1 ! "
        "streamconv name=s filter=box:size=3 backend=cpu ! identity sleep-time=80000 ! "
        "fakesink sync=true qos=true"
    )
    element = pipeline.get_by_name("s")
    pipeline.set_state(Gst.State.PLAYING)
    try:
        bus = pipeline.get_bus()
        qos = None
        while qos is None:  # a slow machine only makes the frames later
            message = bus.timed_pop_filtered(
                20 * Gst.SECOND, Gst.MessageType.QOS | Gst.MessageType.ERROR
            )
            assert message is not None and message.type == Gst.MessageType.QOS, bus_error(pipeline)
            qos = message if message.src == element else None
    finally:
        pipeline.set_state(Gst.State.NULL)
    dropped = qos.parse_qos_stats()[2]
    assert dropped >= 1
    assert element.get_property("dropped") >= dropped
    assert element.get_property("stats").get_value("dropped") == element.get_property("dropped")


def _teed_pipeline(element: str):
    """appsrc ! tee: one branch to appsink ``raw`` untouched, the other through ``element`` to
    appsink ``out``; the tee hands both branches the same buffer, so the element's is shared."""
    Gst = gst()
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time ! tee name=t ! queue ! appsink name=raw sync=false "
        f"t. ! queue ! {element} ! appsink name=out sync=false"
    )
    return pipeline, pipeline.get_by_name("src")


def _pull_all(pipeline, name: str) -> list:
    Gst = gst()
    sink, samples = pipeline.get_by_name(name), []
    while (sample := sink.emit("try-pull-sample", 10 * Gst.SECOND)) is not None:
        samples.append(sample_frame(sample))
    return samples


@pytest.mark.parametrize("chains", [("", "tmean:frames=3"), ("tdiff", "", "box:size=3")],
                         ids=["empty-to-temporal", "temporal-to-empty-to-2d"])
def test_a_chain_set_from_none_while_playing_filters_shared_buffers_into_copies(
        rng, holding, chains):
    """A filter set while playing where none was (frames passing as they are) takes the next frame
    without writing into the buffer a tee shares with another branch: that branch keeps the
    frames as they came, this one gets each chain's frames, as StreamFilter gives them."""
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(3 * len(chains))]
    caps = "video/x-raw,format=RGB,width=64,height=48,framerate=25/1"
    pipeline, source = _teed_pipeline(f'streamconv name=s filter="{chains[0]}" backend=cpu '
                                      f"ring-depth={holding}")
    Gst = gst()
    _set_before_frames(pipeline.get_by_name("s"),
                       {3 * n + 1: ("filter", chain) for n, chain in enumerate(chains) if n})
    pipeline.set_state(Gst.State.PLAYING)
    try:
        for index, frame in enumerate(frames):
            _push(source, frame, caps, index)
        source.emit("end-of-stream")
        outputs, untouched = _pull_all(pipeline, "out"), _pull_all(pipeline, "raw")
        error = bus_error(pipeline)
    finally:
        pipeline.set_state(Gst.State.NULL)
    assert error is None and len(outputs) == len(frames), error
    wanted = []
    for number, chain in enumerate(chains):
        part = frames[3 * number: 3 * number + 3]
        if not chain:
            wanted += part
            continue
        with streamconv.StreamFilter(chain.split(" -> "), backend="cpu") as reference:
            wanted += list(reference.map(part))
    for number, ((_, data, _), want) in enumerate(zip(outputs, wanted)):
        assert np.array_equal(data.reshape(want.shape), want), number
    assert [pts for pts, _, _ in untouched] == [pts for pts, _, _ in outputs]
    for number, ((_, data, _), frame) in enumerate(zip(untouched, frames)):
        assert np.array_equal(data.reshape(frame.shape), frame), number


@pytest.mark.parametrize("before, after, frames", [("box:size=3", "tmean:frames=5", 2),
                                                   ("tmean:frames=5", "box:size=3", -2),
                                                   ("tdiff", "tmean:frames=9", 3)])
def test_a_chain_changed_while_playing_posts_its_new_latency(holding, before, after, frames):
    """A live pipeline's latency is set once, from the query; a chain whose look-ahead differs
    from the old one's holds frames longer (or shorter), so the element posts a latency message
    and the application's recalculation (as gst-launch-1.0 does it) finds the new look-ahead."""
    Gst = gst()
    pipeline = Gst.parse_launch(
        "videotestsrc is-live=true ! video/x-raw,format=RGB,width=64,height=48,framerate=30/1 ! "
        f"streamconv name=s filter={before} backend=cpu ring-depth=3 ! fakesink name=out sync=true"
    )
    element, sink, bus = pipeline.get_by_name("s"), pipeline.get_by_name("out"), pipeline.get_bus()

    def next_latency_message():
        while True:
            message = bus.timed_pop_filtered(
                10 * Gst.SECOND, Gst.MessageType.LATENCY | Gst.MessageType.ERROR)
            assert message is not None and message.type == Gst.MessageType.LATENCY, (
                bus_error(pipeline) or "no latency message")
            if message.src == element:
                return

    pipeline.set_state(Gst.State.PLAYING)
    try:
        assert pipeline.get_state(10 * Gst.SECOND)[0] == Gst.StateChangeReturn.SUCCESS
        first = sink.get_latency()  # what the pipeline configured on its sink
        element.set_property("filter", after)
        next_latency_message()
        assert pipeline.recalculate_latency()
        assert sink.get_latency() == first + frames * (Gst.SECOND // 30)
    finally:
        pipeline.set_state(Gst.State.NULL)


def test_a_longer_look_ahead_set_while_playing_gets_buffers_from_a_fixed_pool(rng):
    """A source whose pool cannot grow once made (v4l2src's, played by videotestsrc whose
    allocation answer is made fixed: the buffers asked for and one more) must not run dry when a
    new chain holds more frames than the old: the element has it ask for buffers anew. Every
    frame comes out, each chain's as StreamFilter gives it."""
    Gst = gst()
    total, change = 30, 10
    pipeline = Gst.parse_launch(
        f"videotestsrc name=v num-buffers={total} pattern=ball ! "
        "video/x-raw,format=RGB,width=32,height=24,framerate=30/1 ! "
        "streamconv name=s filter=tmean:frames=3 backend=cpu ! tee ! queue ! "
        "appsink name=out sync=false"
    )
    element, pools, inputs = pipeline.get_by_name("s"), [], []

    def fixed_pool(_pad, info):
        query = info.get_query()
        if query.type == Gst.QueryType.ALLOCATION and query.get_n_allocation_pools():
            pool, size, least, _ = query.parse_nth_allocation_pool(0)
            query.set_nth_allocation_pool(0, pool, size, least + 1, least + 1)
            pools.append(least + 1)
        return Gst.PadProbeReturn.OK

    def before_frame(_pad, info):
        buffer = info.get_buffer()
        inputs.append(np.frombuffer(buffer.extract_dup(0, buffer.get_size()), np.uint8))
        if len(inputs) == change + 1:
            element.set_property("filter", "tmean:frames=9")
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("v").get_static_pad("src").add_probe(
        Gst.PadProbeType.QUERY_DOWNSTREAM | Gst.PadProbeType.PULL, fixed_pool)
    element.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, before_frame)
    outputs = pull_frames(pipeline, timeout=20)
    assert len(outputs) == total and pools[0] == 3 and pools[-1] == 1 + 4 + 1, pools
    frames = [data.reshape(24, 32, 3) for data in inputs]
    wanted = []
    for chain, part in (("tmean:frames=3", frames[:change]), ("tmean:frames=9", frames[change:])):
        with streamconv.StreamFilter(chain, backend="cpu") as reference:
            wanted += list(reference.map(part))
    for number, ((_, data, _), want) in enumerate(zip(outputs, wanted)):
        assert np.array_equal(data.reshape(want.shape), want), number


@pytest.mark.parametrize("prop, value", [("filter", "tmean:frames=5 -> box:size=3"),
                                         ("border", "replicate")])
def test_a_property_set_to_its_own_value_while_playing_keeps_the_window(rng, holding, prop,
                                                                        value):
    """Setting the filter or border it already has (an application applying its settings again)
    changes nothing: the window across frames goes on, every frame as StreamFilter gives it on
    the whole stream, none flushed early with the edge frames repeated."""
    chain = "tmean:frames=5 -> box:size=3"
    frames = [rng.integers(0, 256, (48, 64, 3), np.uint8) for _ in range(10)]
    caps = "video/x-raw,format=RGB,width=64,height=48,framerate=25/1"
    pipeline, source = _appsrc_pipeline(f'streamconv name=s filter="{chain}" border=replicate '
                                        f"backend=cpu ring-depth={holding}")
    _set_before_frames(pipeline.get_by_name("s"), {4: (prop, value), 7: (prop, value)})
    for index, frame in enumerate(frames):
        _push(source, frame, caps, index)
    source.emit("end-of-stream")
    outputs = pull_frames(pipeline)
    with streamconv.StreamFilter(chain.split(" -> "), border="replicate",
                                 backend="cpu") as reference:
        wanted = list(reference.map(frames))
    assert len(outputs) == len(frames)
    for number, ((_, data, _), want) in enumerate(zip(outputs, wanted)):
        assert np.array_equal(data.reshape(want.shape), want), number
