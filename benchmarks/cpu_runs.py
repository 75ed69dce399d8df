"""One measured run of ``cpu.py``, in a process of its own: its CPU time is the process's alone.

    python benchmarks/cpu_runs.py '{"code": ROOT, "run": "transcode", ...}'

``code`` is the checkout whose ``streamconv`` is imported (so one benchmark run can time the
code before a change beside the code after it); the result is one JSON line on stdout.

Runs:
  transcode  a clip through one filter into libx264 ultrafast, by ``mode``: ``default``
             (streamconv, CPU backend, yuv420p planes converted by the backend), ``separable``
             (the same with ``kernel="separable"``, rank-1 filters only), ``host``
             (streamconv with ``--colour host``: FFmpeg's scaler), ``naive`` (the serial PyAV +
             ``cv2.filter2D`` loop), ``ffmpeg_yuv`` / ``ffmpeg_rgb`` (PyAV's filter graph with
             FFmpeg's ``convolution`` filter on the yuv420p planes, or on gbrp between two
             scaler passes), ``copy`` (decoding and encoding alone, no filter: the floor);
             process CPU seconds and wall seconds of the whole transcode
  api        ``Filter(spec, backend="cpu")(x)`` against ``cv2.filter2D(x, -1, taps)`` on one
             random frame (and with ``separable``, box and Gaussian through
             ``kernel="separable"``): ms per call, wall (median) and process CPU (mean)
  output     SHA-256 digests of outputs on seeded random inputs (filters and the 4:2:0
             conversion), for a byte-for-byte comparison
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import tempfile
import time
from itertools import chain
from pathlib import Path

ENCODE_OPTIONS = {"preset": "ultrafast"}


def filter_stage(name: str):
    """The FilterStage of a benchmark filter name: ``box5``, ``gauss2`` (sigma 2, 13 x 13),
    ``boxK`` / ``gaussK`` (K x K, sigma (K - 1) / 6) or ``randK`` (seeded random float taps)."""
    import numpy as np

    from streamconv.chain.filters import FilterStage, parse_filter, validate_taps

    if name == "gauss2":
        return parse_filter("gaussian:sigma=2")
    size = int(name.lstrip("boxgausrnd"))
    if name.startswith("box"):
        return parse_filter(f"box:size={size}")
    if name.startswith("gauss"):
        return parse_filter(f"gaussian:sigma={(size - 1) / 6},size={size}")
    taps = np.random.default_rng(size).normal(0.0, 1.0, (size, size)) / size
    taps[size // 2, size // 2] += 1.0
    return FilterStage("custom", {}, (validate_taps(taps),))


def convolution_options(name: str, taps) -> list[str] | None:
    """FFmpeg ``convolution`` filters (option strings, applied in turn) doing ``name``'s work:
    integer taps over a divisor, so random taps are rounded to multiples of 1/256 (the same
    work); a 13 x 13 Gaussian as a row and a column pass. None where FFmpeg cannot (square
    matrices above 7 x 7)."""
    import numpy as np

    def one(values, divisor, mode="square"):
        matrix = " ".join(str(int(v)) for v in values)
        return ":".join(f"{p}m={matrix}:{p}rdiv={1 / float(divisor)!r}:{p}mode={mode}"
                        for p in range(3))

    size = taps.shape[0]
    if name.startswith("gauss"):
        row = np.round(taps[size // 2] / taps[size // 2].max() * 64)
        return [one(row, row.sum(), "row"), one(row, row.sum(), "column")]
    if size > 7:
        return None
    if name.startswith("box"):
        return [one(np.ones(size * size), size * size)]
    return [one(np.round(taps.ravel() * 256), 256)]


def open_output(path: Path, width: int, height: int, rate):
    """An mp4 container with a libx264 ultrafast yuv420p stream."""
    import av

    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=rate)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = dict(ENCODE_OPTIONS)
    stream.thread_type = "AUTO"
    return container, stream


def frames_through(clip: Path, out: Path, change) -> int:
    """Decode ``clip``, pass each frame through ``change(frame) -> [frames]`` (``change(None)``
    at the end: what it holds back), encode what comes out, numbered 0, 1, 2, ..."""
    import av

    count = 0
    with av.open(str(clip)) as source:
        video_in = source.streams.video[0]
        video_in.thread_type = "AUTO"
        target, stream = open_output(out, video_in.width, video_in.height, video_in.average_rate)
        with target:
            for frame in chain(source.decode(video_in), [None]):
                for video in change(frame):
                    video.pts, video.time_base = count, 1 / video_in.average_rate
                    count += 1
                    for packet in stream.encode(video):
                        target.mux(packet)
            for packet in stream.encode(None):
                target.mux(packet)
    return count


def naive_change(taps):
    """The obvious loop's work on a frame: to RGB, ``cv2.filter2D``, back to a frame."""
    import av
    import cv2

    kernel = taps.astype("float32")

    def change(frame):
        if frame is None:
            return []
        rgb = frame.to_ndarray(format="rgb24")
        filtered = cv2.filter2D(rgb, -1, kernel, borderType=cv2.BORDER_REFLECT_101)
        return [av.VideoFrame.from_ndarray(filtered, format="rgb24")]
    return change


def ffmpeg_change(clip: Path, filters: list[str], rgb: bool):
    """FFmpeg's convolution filter on each frame through PyAV's filter graph."""
    import av

    with av.open(str(clip)) as probe:
        template = probe.streams.video[0]
        graph = av.filter.Graph()
        nodes = [graph.add_buffer(template=template)]
    nodes += [graph.add("format", "gbrp")] if rgb else []
    nodes += [graph.add("convolution", options) for options in filters]
    nodes += [graph.add("format", "yuv420p"), graph.add("buffersink")]
    graph.link_nodes(*nodes).configure()

    def change(frame):
        graph.vpush(frame)
        done = []
        while True:
            try:
                done.append(graph.vpull())
            except (av.error.BlockingIOError, av.error.EOFError):
                return done
    return change


def transcode(task: dict) -> dict:
    """Time one transcode of ``task["clip"]`` by ``task["mode"]`` (see the module docstring)."""
    import streamconv

    clip, mode = Path(task["clip"]), task["mode"]
    stage = filter_stage(task["filter"])
    with tempfile.TemporaryDirectory() as work:
        out = Path(work) / "out.mp4"
        begin, cpu_begin = time.perf_counter(), time.process_time()
        if mode in ("default", "host", "separable"):
            if mode == "separable" and not task["filter"].startswith(("box", "gauss")):
                return {"skipped": "the taps are not rank 1"}
            pipeline = streamconv.Pipeline(
                clip, [stage], str(out), backend="cpu",
                sink_options={"preset": "ultrafast", "overwrite": True},
                colour="host" if mode == "host" else "auto",
                kernel="separable" if mode == "separable" else "auto")
            if (pipeline.planes is None) != (mode == "host"):
                raise SystemExit(f"mode {mode}: the wrong colour path was taken")
            frames = pipeline.run().frames
        elif mode == "naive":
            frames = frames_through(clip, out, naive_change(stage.taps[0]))
        elif mode == "copy":
            frames = frames_through(clip, out, lambda frame: [] if frame is None else [frame])
        else:
            filters = convolution_options(task["filter"], stage.taps[0])
            if filters is None:
                return {"skipped": "FFmpeg's convolution takes square matrices up to 7 x 7"}
            frames = frames_through(clip, out, ffmpeg_change(clip, filters, mode == "ffmpeg_rgb"))
        cpu, wall = time.process_time() - cpu_begin, time.perf_counter() - begin
    return {"frames": frames, "cpu_s": cpu, "wall_s": wall}


def api(task: dict) -> dict:
    """ms per call of ``Filter()(x)`` and of ``cv2.filter2D`` on one random frame."""
    import cv2
    import numpy as np

    import streamconv

    stage = filter_stage(task["filter"])
    height, width = task["size"]
    frame = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    engine = streamconv.Filter(stage, backend="cpu")
    taps = stage.taps[0].astype(np.float32)
    runs = {"filter": lambda: engine(frame),
            "cv2": lambda: cv2.filter2D(frame, -1, taps, borderType=cv2.BORDER_REFLECT_101)}
    if task.get("separable") and task["filter"].startswith(("box", "gauss")):
        fast = streamconv.Filter(stage, backend="cpu", kernel="separable")
        runs["separable"] = lambda: fast(frame)
    result = {}
    for name, run in runs.items():
        run()  # warm-up: buffers, thread pools
        walls = []
        cpu_begin = time.process_time()
        for _ in range(task["repeat"]):
            begin = time.perf_counter()
            run()
            walls.append(time.perf_counter() - begin)
        result[f"{name}_ms"] = 1e3 * statistics.median(walls)
        result[f"{name}_cpu_ms"] = 1e3 * (time.process_time() - cpu_begin) / task["repeat"]
    return result


def output(task: dict) -> dict:
    """Digests of outputs on seeded random inputs, one per case: ``filter`` cases
    (``Filter(stage, border=...)(x)``, uint8 or uint16) and ``planes`` cases (the CPU backend's
    4:2:0 conversion of random planes to RGB, and of random RGB to planes)."""
    import numpy as np

    import streamconv
    from streamconv.backends.cpu.backend import convert_colour
    from streamconv.frames.colour import ColourTags
    from streamconv.frames.yuv import YuvLayout

    rng = np.random.default_rng(task["seed"])
    digests = {}
    for number, case in enumerate(task["cases"]):
        key = f"{number} " + " ".join(f"{name}={value}" for name, value in case.items())
        if case["kind"] == "filter":
            dtype = np.dtype(case["dtype"])
            frame = rng.integers(0, np.iinfo(dtype).max + 1, tuple(case["shape"]), dtype=dtype)
            engine = streamconv.Filter(filter_stage(case["filter"]), backend="cpu",
                                       border=case["border"])
            digests[key] = hashlib.sha256(engine(frame).tobytes()).hexdigest()
            continue
        height, width = case["shape"]
        layout = YuvLayout(width, height, ColourTags(space=case["space"]), case["full"],
                           case["bits"])
        planes = rng.integers(0, 1 << case["bits"], layout.shape).astype(layout.dtype)
        rgb = np.empty(layout.frame_shape, layout.frame_dtype)
        convert_colour(rgb, planes, layout, to_rgb=True)
        digests[key + " to_rgb"] = hashlib.sha256(rgb.tobytes()).hexdigest()
        rgb[...] = rng.integers(0, np.iinfo(layout.frame_dtype).max + 1, rgb.shape)
        convert_colour(rgb, planes, layout, to_rgb=False)
        digests[key + " to_planes"] = hashlib.sha256(planes.tobytes()).hexdigest()
    return digests


def main() -> None:
    task = json.loads(sys.argv[1])
    sys.path.insert(0, task["code"])
    import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
    print(json.dumps({"transcode": transcode, "api": api, "output": output}[task["run"]](task)))


if __name__ == "__main__":
    main()
