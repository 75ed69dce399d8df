"""End-to-end throughput: is a transcode through streamconv as fast as the codec allows?

    python benchmarks/pipeline.py [--sizes 1080p,4K] [--frames N] [--backend cuda] [--bits 8|10]
                                  [--hwaccel cuda] [--nvdec] [--json PATH]

For each size, one generated H.264 clip (a moving test pattern with noise, so the codec
has real work; yuv420p, or yuv420p10le with ``--bits 10``, where every step below works in
10 bits and 16-bit RGB instead), then frames per second of:
  decode            PyAV decoding alone (the clip's yuv420p frames, decoder threads on)
  decode+rgb        decoding and converting each frame to RGB, as streamconv's reader does
  encode            libx264 ultrafast encoding alone, from yuv420p frames already in memory
  naive loop        the obvious serial PyAV + cv2.filter2D loop: decode, to RGB, 5x5 box,
                    from RGB, encode, one frame at a time
  streamconv null   streamconv file -> 5x5 box -> nothing (decode and filter only)
  streamconv file   streamconv file -> 5x5 box -> libx264 ultrafast file
  host colour       the same file run with colour converted on the host (FFmpeg's scaler,
                    RGB slots) instead of yuv420p planes converted by the backend
With ``--hwaccel KIND`` (e.g. cuda: NVDEC), decoding alone and both streamconv runs are also
timed with the decoder on that hardware (frames come back to host memory as nv12 or p010le),
after checking that it gives the software decoder's planes.
With ``--nvdec``, the same with NVDEC through PyNvVideoCodec (frames decoded into the slots'
device planes): NVDEC decoding alone (demux, decode, frames left on the GPU), streamconv null and
file, after checking that NVDEC gives the software decoder's planes. The streamconv and NVDEC
rows are timed after one untimed run (a decoder session's and the kernels' first start). Every timed row also
reports the process's CPU time per frame (all threads), so the CPU NVDEC frees is visible.
Targets (on the GPU machine, CUDA backend): file >= 0.95 x encode, null >= 0.9 x decode,
file >= 1.8 x the naive loop at 1080p; with NVDEC, file >= 0.9 x min(encode, NVDEC decode),
null >= 0.9 x NVDEC decode, and at most half the CPU time per frame of the CPU-decode run. The streamconv outputs are checked against the CPU
backend on a few frames first.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import av  # noqa: E402  (after cv2: see streamconv.io.sinks.display.check_import_order)
from av.codec.hwaccel import HWAccel  # noqa: E402

import streamconv  # noqa: E402

import benchinfo  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.chain.filters import parse_chain  # noqa: E402

SIZES = {"360p": (640, 360), "720p": (1280, 720), "1080p": (1920, 1080), "4K": (3840, 2160)}
SPEC = "box:size=5"
ENCODE_OPTIONS = {"preset": "ultrafast"}
FPS = 30
PIX_FMT, RGB_FMT = "yuv420p", "rgb24"  # --bits 10: yuv420p10le, rgb48le


def make_clip(path: Path, width: int, height: int, frames: int) -> None:
    """An H.264 clip of a moving pattern with light noise (the noise keeps the codec busy)."""
    pattern = streamconv.TestPattern(width, height, fps=FPS, frames=frames)
    noise = np.random.default_rng(1).integers(0, 24, (4, height, width, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, PIX_FMT
        stream.options = {"preset": "veryfast", "crf": "23"}
        stream.thread_type = "AUTO"
        for index, frame in enumerate(pattern):
            frame += noise[index % len(noise)]
            if RGB_FMT == "rgb48le":
                frame = frame.astype(np.uint16) * 257
            video = av.VideoFrame.from_ndarray(frame, format=RGB_FMT)
            video.pts = index
            for packet in stream.encode(video):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


CPU_MS: dict[int, float] = {}  # id of the last fps_of's run -> process CPU ms per frame


def fps_of(run, frames: int) -> float:
    """Frames per second of ``run()`` (which returns the frames it did); its process CPU time per
    frame (every thread's) goes to ``CPU_MS[id(run)]``."""
    begin, cpu_begin = time.perf_counter(), time.process_time()
    counted = run()
    elapsed, cpu = time.perf_counter() - begin, time.process_time() - cpu_begin
    if counted != frames:
        raise SystemExit(f"expected {frames} frames, got {counted}")
    CPU_MS[id(run)] = 1e3 * cpu / frames
    return frames / elapsed


def timed(row: dict, key: str, run, frames: int, *, warm: bool = False) -> None:
    """row[key] = fps of ``run``; row[key + "_cpu_ms"] = its CPU milliseconds per frame. With
    ``warm``, ``run`` goes once untimed first (a decoder session's and the kernels' first start)."""
    if warm:
        run()
    row[key] = fps_of(run, frames)
    row[key + "_cpu_ms"] = CPU_MS.pop(id(run))


def nvdec_decode_only(clip: Path) -> int:
    """NVDEC alone: demux with PyAV, decode with PyNvVideoCodec, frames left on the GPU."""
    import PyNvVideoCodec as nvc  # optional (the nvdec extra)

    from streamconv.gpu.binding import binding

    gpu = binding()
    context = gpu.device(0).retain_primary_context()
    context.push()
    count = 0
    try:
        stream = gpu.stream()
        decoder = nvc.CreateDecoder(gpuid=0, codec=nvc.cudaVideoCodec.H264, cudacontext=context.handle,
                                    cudastream=stream.handle, usedevicememory=True)
        with av.open(str(clip)) as container:
            video = container.streams.video[0]
            annex_b = av.bitstream.BitStreamFilterContext("h264_mp4toannexb", video)
            for packet in container.demux(video):
                for filtered in annex_b.filter(packet if packet.size else None):
                    data = np.frombuffer(bytes(filtered), np.uint8)
                    bitstream = nvc.PacketData()
                    bitstream.bsl_data, bitstream.bsl, bitstream.pts = data.ctypes.data, data.size, filtered.pts or 0
                    count += len(decoder.Decode(bitstream))
        count += len(decoder.Decode(nvc.PacketData()))
        stream.synchronize()
        del decoder, stream  # destroyed while the context is current and held
    finally:
        context.pop()
        context.release()
    return count


def decode_only(clip: Path, *, rgb: bool, hwaccel: str | None = None) -> int:
    count = 0
    hardware = HWAccel(device_type=hwaccel, allow_software_fallback=False) if hwaccel else None
    with av.open(str(clip), hwaccel=hardware) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            if rgb:
                frame.to_ndarray(format=RGB_FMT)
            count += 1
    return count


def yuv_frames(clip: Path, count: int) -> list:
    """Up to ``count`` decoded frames of the clip (yuv420p or yuv420p10le), kept in memory."""
    frames = []
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            frames.append(frame)
            if len(frames) == count:
                break
    return frames


def encode_only(frames: list, total: int, out: Path, width: int, height: int) -> int:
    with av.open(str(out), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, PIX_FMT
        stream.options = dict(ENCODE_OPTIONS)
        stream.thread_type = "AUTO"
        for index in range(total):
            frame = frames[index % len(frames)]
            frame.pts = index
            frame.time_base = Fraction(1, FPS)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return total


def naive_loop(clip: Path, out: Path) -> int:
    """The serial loop streamconv must beat: every step waits for the one before."""
    kernel = np.full((5, 5), 1 / 25, np.float32)
    count = 0
    with av.open(str(clip)) as source, av.open(str(out), "w") as target:
        video_in = source.streams.video[0]
        video_in.thread_type = "AUTO"
        stream = target.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = video_in.width, video_in.height, PIX_FMT
        stream.options = dict(ENCODE_OPTIONS)
        stream.thread_type = "AUTO"
        for frame in source.decode(video_in):
            rgb = frame.to_ndarray(format=RGB_FMT)
            filtered = cv2.filter2D(rgb, -1, kernel, borderType=cv2.BORDER_REFLECT_101)
            video = av.VideoFrame.from_ndarray(filtered, format=RGB_FMT)
            video.pts = count
            for packet in stream.encode(video):
                target.mux(packet)
            count += 1
        for packet in stream.encode(None):
            target.mux(packet)
    return count


STAGE_MEANS: dict[str, dict[str, float]] = {}  # run label -> stage -> mean ms, for the JSON


def streamconv_run(clip: Path, out: Path | None, backend: str, *, colour: str = "backend",
                   hwaccel: str | None = None, nvdec: bool = False) -> int:
    sink_options = {"preset": "ultrafast", "overwrite": True} if out is not None else None
    source = (streamconv.open_source(clip, decoder="nvdec") if nvdec
              else streamconv.FileSource(clip, hwaccel=hwaccel))
    pipeline = streamconv.Pipeline(source, [SPEC], str(out) if out else None,
                                   backend=backend, sink_options=sink_options, colour=colour)
    if colour == "backend" and pipeline.planes is None:
        raise SystemExit(f"expected the {PIX_FMT} planes path")
    if nvdec and not pipeline.device_input:
        raise SystemExit("expected NVDEC to decode into the slots' device planes")
    stats = pipeline.run()
    label = (f"{clip.stem} {'file' if out else 'null'}{'' if colour == 'backend' else ' host colour'}"
             f"{f' {hwaccel} decode' if hwaccel else ''}{' nvdec' if nvdec else ''}")
    STAGE_MEANS[label] = {stage: round(row["mean"], 3) for stage, row in stats.summary().items()}
    return stats.frames


def check_planes(clip: Path, backend: str) -> int:
    """Max |planes through the backend - planes through the CPU backend| over the clip's first
    frames, outputs poisoned first."""
    from streamconv.backends import create_backend

    worst = 0
    with streamconv.FileSource(clip) as source:
        layout = source.planes
        engines = [create_backend(name, parse_chain([SPEC])) for name in (backend, "cpu")]
        slots = [engine.allocate_slots(source.shape, 1, planes=layout)[0] for engine in engines]
        for _ in range(3):
            source.read_into(slots[0].host_in)
            outputs = []
            for engine, slot in zip(engines, slots):
                slot.host_in[:] = slots[0].host_in
                slot.host_out.fill(0xA5)
                slot.reset()
                engine.submit(slot)
                engine.wait(slot)
                outputs.append(slot.host_out.astype(np.int16))
            worst = max(worst, int(np.abs(outputs[0] - outputs[1]).max()))
        for engine in engines:
            engine.close()
    if worst > 1:
        raise SystemExit(f"{backend} planes differ from the CPU backend by {worst} LSB")
    return worst


def check(clip: Path, backend: str) -> int:
    """Max |streamconv - CPU backend| over the clip's first frames (RGB frames)."""
    got = []
    streamconv.Pipeline(streamconv.FileSource(clip), [SPEC],
                        streamconv.CallbackSink(lambda frame, meta: got.append(frame.copy())),
                        backend=backend, max_frames=3).run()
    cpu = CpuBackend(parse_chain([SPEC]))
    with streamconv.FileSource(clip) as source:
        expected = [cpu.apply(frame) for frame, _ in zip(source, range(3))]
    worst = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(got, expected))
    if worst > 1:
        raise SystemExit(f"{backend} output differs from the CPU backend by {worst} LSB")
    return worst


def hardware_planes_difference(clip: Path, hwaccel: str) -> int:
    """Largest difference between the planes of the hardware-decoded and the software-decoded
    clip (0: the hardware decoder gives the same frames)."""
    worst = 0
    with streamconv.FileSource(clip, hwaccel=hwaccel) as hardware, streamconv.FileSource(clip) as software:
        if not hardware.hardware_decoding:
            raise SystemExit(f"{hwaccel} does not decode {clip.name} here")
        got, expected = np.empty(hardware.planes.shape, hardware.planes.dtype), np.empty(software.planes.shape,
                                                                                          software.planes.dtype)
        while hardware.read_into(got) is not None:
            software.read_into(expected)
            worst = max(worst, int(np.abs(got.astype(np.int64) - expected).max()))
    return worst


def nvdec_rows(row: dict, clip: Path, work: Path, backend: str, frames: int) -> None:
    """NVDEC's rows: its planes checked against software decoding, then decode alone, null, file."""
    row["nvdec_planes_max_diff"] = nvdec_planes_difference(clip)
    row["nvdec_session_mib"] = NVDEC_SESSION_MIB[clip.stem]
    timed(row, "nvdec_decode", lambda: nvdec_decode_only(clip), frames, warm=True)
    timed(row, "streamconv_null_nvdec", lambda: streamconv_run(clip, None, backend, nvdec=True), frames, warm=True)
    timed(row, "streamconv_file_nvdec", lambda: streamconv_run(clip, work / "sc.mp4", backend, nvdec=True), frames,
          warm=True)
    bound = min(row["encode"], row["nvdec_decode"])
    row["nvdec_file_over_bound"] = row["streamconv_file_nvdec"] / bound
    row["nvdec_null_over_decode"] = row["streamconv_null_nvdec"] / row["nvdec_decode"]
    row["nvdec_cpu_ms_over_cpu_decode"] = row["streamconv_file_nvdec_cpu_ms"] / row["streamconv_file_cpu_ms"]


NVDEC_SESSION_MIB: dict[str, float] = {}  # clip -> device memory one NVDEC session took


def nvdec_planes_difference(clip: Path) -> int:
    """Largest difference between NVDEC's planes and the software decoder's over the whole clip."""
    worst = 0
    with streamconv.open_source(clip, decoder="nvdec") as hardware, streamconv.FileSource(clip) as software:
        got, expected = np.empty(hardware.planes.shape, hardware.planes.dtype), np.empty(software.planes.shape,
                                                                                          software.planes.dtype)
        while hardware.read_into(got) is not None:
            if software.read_into(expected) is None:
                raise SystemExit("NVDEC gave more frames than the software decoder")
            worst = max(worst, int(np.abs(got.astype(np.int64) - expected).max()))
        if software.read_into(expected) is not None:
            raise SystemExit("NVDEC gave fewer frames than the software decoder")
        NVDEC_SESSION_MIB[clip.stem] = hardware.decoder_memory / 2**20
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1080p,4K", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--frames", type=int, default=300, help="frames per clip (default 300)")
    parser.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--bits", type=int, default=8, choices=(8, 10),
                        help="the clip's bits per sample (10: yuv420p10le, filtered in 16 bits)")
    parser.add_argument("--hwaccel", metavar="KIND",
                        help="also time decoding on this hardware decoder (e.g. cuda) and streamconv with it")
    parser.add_argument("--nvdec", action="store_true",
                        help="also time NVDEC (PyNvVideoCodec) decoding alone and streamconv with it")
    parser.add_argument("--json", default="pipeline.json")
    args = parser.parse_args()
    global PIX_FMT, RGB_FMT
    if args.bits == 10:
        PIX_FMT, RGB_FMT = "yuv420p10le", "rgb48le"
    backend = streamconv.backends.resolve_backend(args.backend)
    result = {"environment": {"python": platform.python_version(), "av": av.__version__,
                              "opencv": cv2.__version__, "streamconv": streamconv.__version__,
                              "cores": __import__("os").cpu_count(), "commit": benchinfo.commit(),
                              "backend": backend},
              "filter": SPEC, "pix_fmt": PIX_FMT, "encoder": {"codec": "libx264", **ENCODE_OPTIONS},
              "sizes": []}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for label in args.sizes.split(","):
            width, height = SIZES[label.strip()]
            clip = work / f"{label}.mp4"
            make_clip(clip, width, height, args.frames)
            worst = max(check(clip, backend), check_planes(clip, backend))
            frames = yuv_frames(clip, 30)
            row = {"size": label, "frames": args.frames, "max_lsb_vs_cpu": worst}
            timed(row, "decode", lambda: decode_only(clip, rgb=False), args.frames)
            timed(row, "decode_rgb", lambda: decode_only(clip, rgb=True), args.frames)
            timed(row, "encode", lambda: encode_only(frames, args.frames, work / "enc.mp4", width, height),
                  args.frames)
            timed(row, "naive", lambda: naive_loop(clip, work / "naive.mp4"), args.frames)
            timed(row, "streamconv_null", lambda: streamconv_run(clip, None, backend), args.frames, warm=True)
            timed(row, "streamconv_file", lambda: streamconv_run(clip, work / "sc.mp4", backend), args.frames,
                  warm=True)
            timed(row, "host_colour_file", lambda: streamconv_run(clip, work / "sc.mp4", backend, colour="host"),
                  args.frames)
            if args.hwaccel:
                row["hw_planes_max_diff"] = hardware_planes_difference(clip, args.hwaccel)
                timed(row, "decode_hw", lambda: decode_only(clip, rgb=False, hwaccel=args.hwaccel), args.frames)
                timed(row, "streamconv_null_hw", lambda: streamconv_run(clip, None, backend, hwaccel=args.hwaccel),
                      args.frames)
                timed(row, "streamconv_file_hw",
                      lambda: streamconv_run(clip, work / "sc.mp4", backend, hwaccel=args.hwaccel), args.frames)
            if args.nvdec:
                nvdec_rows(row, clip, work, backend, args.frames)
            row["file_over_encode"] = row["streamconv_file"] / row["encode"]
            row["null_over_decode"] = row["streamconv_null"] / row["decode"]
            row["file_over_naive"] = row["streamconv_file"] / row["naive"]
            result["sizes"].append(row)
    result["stage_means_ms"] = STAGE_MEANS
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")

    env = result["environment"]
    print(f"\nstreamconv {SPEC} on {backend}, {PIX_FMT}, libx264 ultrafast, {env['cores']} cores, "
          f"commit {env['commit']}")
    columns = ("decode", "decode_rgb", "encode", "naive", "streamconv_null", "streamconv_file", "host_colour_file")
    print(f"{'size':<7}" + "".join(f"{c:>16}" for c in columns) + "   (frames/s)")
    for row in result["sizes"]:
        print(f"{row['size']:<7}" + "".join(f"{row[c]:>16.1f}" for c in columns))
    print("\nmean ms per frame and stage (the last run of each):")
    for label, stages in STAGE_MEANS.items():
        print(f"  {label:<24}" + "  ".join(f"{stage} {ms:.2f}" for stage, ms in stages.items()))
    if args.hwaccel:
        print(f"\ndecoded on {args.hwaccel} (frames back in host memory; planes equal to software decoding "
              f"within the max diff shown):")
        columns = ("decode_hw", "streamconv_null_hw", "streamconv_file_hw", "hw_planes_max_diff")
        print(f"{'size':<7}" + "".join(f"{c:>20}" for c in columns))
        for row in result["sizes"]:
            print(f"{row['size']:<7}" + "".join(f"{row[c]:>20.1f}" for c in columns))
    if args.nvdec:
        print("\nNVDEC (PyNvVideoCodec), frames decoded into the slots' device planes; frames/s, and CPU ms "
              "per frame of the whole process:")
        columns = ("nvdec_decode", "streamconv_null_nvdec", "streamconv_file_nvdec")
        print(f"{'size':<7}" + "".join(f"{c:>24}" for c in columns) + f"{'file cpu ms (cpu decode)':>28}")
        for row in result["sizes"]:
            print(f"{row['size']:<7}" + "".join(f"{row[c]:>16.1f} ({row[c + '_cpu_ms']:5.2f})" for c in columns)
                  + f"{row['streamconv_file_cpu_ms']:>28.2f}")
        print(f"{'size':<7}{'planes diff':>12}{'file/min(enc,nvdec)':>21}{'null/nvdec':>12}{'cpu ratio':>11}"
              f"{'session MiB':>13}   targets 0, 0.9, 0.9, <= 0.5")
        for row in result["sizes"]:
            print(f"{row['size']:<7}{row['nvdec_planes_max_diff']:>12}{row['nvdec_file_over_bound']:>21.2f}"
                  f"{row['nvdec_null_over_decode']:>12.2f}{row['nvdec_cpu_ms_over_cpu_decode']:>11.2f}"
                  f"{row['nvdec_session_mib']:>13.0f}")
    print(f"\n{'size':<7}{'file/encode':>13}{'null/decode':>13}{'file/naive':>12}   targets 0.95, 0.9, 1.8 (1080p)")
    for row in result["sizes"]:
        print(f"{row['size']:<7}{row['file_over_encode']:>13.2f}{row['null_over_decode']:>13.2f}"
              f"{row['file_over_naive']:>12.2f}")


if __name__ == "__main__":
    sys.exit(needs.run(main))
