"""The streamconv GStreamer element's throughput against the same pipeline without it.

    python benchmarks/gstreamer.py [--size 4K] [--frames 300] [--filter box:size=5] [--runs 3]
                                   [--json PATH]

One generated H.264 clip (benchmarks/pipeline.py's moving pattern with noise), then frames per
second, each pipeline ending in ``fakesink sync=false`` and timed from its first frame at the
sink to EOS, the median of ``--runs`` after one untimed run:

  nvdec cuda        nvh264dec ! cudaconvert ! RGBA in CUDA memory       (GPU decode, no copy)
  + streamconv      the same, the element filtering the CUDA memory in place (backend=cuda)
  nvdec nv12        nvh264dec ! NV12 in system memory
  + streamconv r3   the same, the element's planes path on the cuda backend, ring-depth=3
  + streamconv r1   the same, ring-depth=1
  avdec i420        decodebin (libav, on the CPU) ! I420
  + streamconv r3   the same, the element on the cuda backend, ring-depth=3

Before any timing, each element pipeline's output on a short clip of the same size is checked:
against streamconv.Filter on the CPU (CUDA memory, RGBA) and against the element itself on the
cpu backend (planes), with an exact chain (sharpen: integer taps, so the GPU must give the CPU's
bytes). Rows whose elements GStreamer lacks (nvcodec without a GPU driver) are left out, saying so.
Needs GStreamer with gst-python, and its nvcodec plugins for the CUDA rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

import benchinfo  # noqa: E402
import streamconv  # noqa: E402
import streamconv.gst  # noqa: E402
from pipeline import SIZES, make_clip  # noqa: E402

CHECK_FILTER = "sharpen"
DECODE = "filesrc location={clip} ! qtdemux ! "
NVDEC = DECODE + "h264parse ! nvh264dec ! "
AVDEC = DECODE + "avdec_h264 ! videoconvert ! "
CUDA_RGBA = "cudaconvert ! video/x-raw(memory:CUDAMemory),format=RGBA"
ELEMENT = " ! streamconv name=s filter={filter} backend={backend} ring-depth="
ROWS = {  # name -> (pipeline up to the sink, the decoder it needs)
    "nvdec cuda": (NVDEC + CUDA_RGBA, "nvh264dec"),
    "+ streamconv": (NVDEC + CUDA_RGBA + ELEMENT + "3", "nvh264dec"),
    "nvdec nv12": (NVDEC + "video/x-raw,format=NV12", "nvh264dec"),
    "+ streamconv r3": (NVDEC + "video/x-raw,format=NV12" + ELEMENT + "3", "nvh264dec"),
    "+ streamconv r1": (NVDEC + "video/x-raw,format=NV12" + ELEMENT + "1", "nvh264dec"),
    "avdec i420": (AVDEC + "video/x-raw,format=I420", "avdec_h264"),
    "+ streamconv avdec r3": (AVDEC + "video/x-raw,format=I420" + ELEMENT + "3", "avdec_h264"),
}


def play(description: str) -> tuple[float, int, Gst.Element | None]:
    """Run a pipeline ending in fakesink to EOS; (seconds from its first frame at the sink to EOS,
    frames, the element named s or None)."""
    pipeline = Gst.parse_launch(description + " ! fakesink name=sink sync=false")
    first, count = [], [0]

    def arrived(_pad, _info):
        count[0] += 1
        if not first:
            first.append(time.perf_counter())
        return Gst.PadProbeReturn.OK

    sink = pipeline.get_by_name("sink").get_static_pad("sink")
    sink.add_probe(Gst.PadProbeType.BUFFER, arrived)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        message = pipeline.get_bus().timed_pop_filtered(
            600 * Gst.SECOND, Gst.MessageType.EOS | Gst.MessageType.ERROR)
        end = time.perf_counter()
        if message is None or message.type == Gst.MessageType.ERROR:
            reason = message.parse_error()[0].message if message is not None else "timed out"
            raise RuntimeError(f"{description}: {reason}")
    finally:
        pipeline.set_state(Gst.State.NULL)
    return end - first[0], count[0], pipeline.get_by_name("s")


def frames_of(description: str) -> list[np.ndarray]:
    """Every frame an appsink at the end of ``description`` receives, as flat byte arrays."""
    pipeline = Gst.parse_launch(description + " ! appsink name=out sync=false")
    sink = pipeline.get_by_name("out")
    pipeline.set_state(Gst.State.PLAYING)
    frames = []
    try:
        while (sample := sink.emit("try-pull-sample", 60 * Gst.SECOND)) is not None:
            buffer = sample.get_buffer()
            ok, mapping = buffer.map(Gst.MapFlags.READ)
            frames.append(np.frombuffer(mapping.data, np.uint8).copy())
            buffer.unmap(mapping)
    finally:
        pipeline.set_state(Gst.State.NULL)
    if not frames:
        raise RuntimeError(f"{description}: no frame came out")
    return frames


def check(clip: Path, size: tuple[int, int], has: set[str], backend: str) -> list[str]:
    """Each element path's output on ``clip`` against the CPU reference (exact chain)."""
    width, height = size
    lines = []
    if "nvh264dec" in has:
        rgba = (NVDEC + CUDA_RGBA).format(clip=clip)
        inputs = frames_of(rgba + " ! cudadownload ! video/x-raw,format=RGBA")
        outputs = frames_of(f"{rgba} ! streamconv filter={CHECK_FILTER} backend={backend} ! "
                            "cudadownload ! video/x-raw,format=RGBA")
        with streamconv.Filter(CHECK_FILTER, backend="cpu") as reference:
            for frame, output in zip(inputs, outputs, strict=True):
                expected = reference(frame.reshape(height, width, 4))
                assert np.array_equal(output.reshape(height, width, 4), expected), "CUDA memory"
        lines.append(f"CUDA memory path: {len(outputs)} frames equal to the CPU reference")
    for decoder, fmt in ((NVDEC, "NV12"), (AVDEC, "I420")):
        if ("nvh264dec" if decoder is NVDEC else "avdec_h264") in has:
            base = (decoder.format(clip=clip) + f"video/x-raw,format={fmt} ! streamconv "
                    f"filter={CHECK_FILTER} backend=")
            ours, cpu = frames_of(f"{base}{backend} ring-depth=3"), frames_of(base + "cpu")
            assert len(ours) == len(cpu) and all(map(np.array_equal, ours, cpu)), f"{fmt} planes"
            lines.append(f"{fmt} planes path on {backend}: {len(ours)} frames equal to the cpu's")
    return lines


def measure(clip: Path, spec: str, backend: str, runs: int, has: set[str]) -> dict[str, dict]:
    """The rows (those whose decoder is here): fps (median), frames, the element's p50 times."""
    results = {}
    for name, (template, needs) in ROWS.items():
        if needs not in has:
            print(f"{name}: left out, no {needs} here", file=sys.stderr)
            continue
        description = template.format(clip=clip, filter=spec, backend=backend)
        play(description)  # untimed: decoder session and kernels start
        timings = [play(description) for _ in range(runs)]
        seconds = statistics.median(t[0] for t in timings)
        frames, element = timings[-1][1], timings[-1][2]
        row = {"fps": (frames - 1) / seconds, "frames": frames, "pipeline": description}
        if element is not None:
            stats = element.get_property("stats")
            row.update({f"{key}_p50_ms": stats.get_value(f"{key}-p50-ms")
                        for key in ("read", "upload", "kernel", "download", "write", "latency")
                        if stats.has_field(f"{key}-p50-ms")})
        results[name] = row
    return results


def device_name(backend: str) -> str:
    """The GPU's name (cuda), or the host's processor count (cpu)."""
    if backend != "cuda":
        return f"cpu ({__import__('os').cpu_count()} cores)"
    from streamconv.gpu.binding import binding  # optional: the cuda extra

    return binding().device(0).name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="4K", choices=SIZES)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--filter", default="box:size=5")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", default="cuda", help="cpu: the script's own quick check")
    parser.add_argument("--json")
    options = parser.parse_args()
    Gst.init(None)
    streamconv.gst.register()
    has = {name for name in ("nvh264dec", "avdec_h264") if Gst.ElementFactory.find(name)}
    size = SIZES[options.size]
    with tempfile.TemporaryDirectory() as work:
        short, clip = Path(work) / "check.mp4", Path(work) / "clip.mp4"
        make_clip(short, *size, 6)
        checked = check(short, size, has, options.backend)
        make_clip(clip, *size, options.frames)
        rows = measure(clip, options.filter, options.backend, options.runs, has)
    report = {"commit": benchinfo.commit(), "gstreamer": Gst.version_string(), "size": options.size,
              "backend": options.backend, "filter": options.filter, "checks": checked,
              "device": device_name(options.backend), "rows": rows}
    if options.json:
        Path(options.json).write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(checked))
    print(f"{'pipeline':<24}{'fps':>9}{'kernel p50 ms':>15}{'latency p50 ms':>16}")
    for name, row in rows.items():
        kernel, latency = row.get("kernel_p50_ms"), row.get("latency_p50_ms")
        print(f"{name:<24}{row['fps']:>9.1f}{kernel or float('nan'):>15.3f}"
              f"{latency or float('nan'):>16.3f}")


if __name__ == "__main__":
    main()
