"""4K -> 1080p RGB 8-bit resampling on the GPU and the CPU: streamconv's scale stage (its kernel
alone, and through the API on device frames), PyTorch's F.interpolate with antialiasing (bilinear
and bicubic, the uint8 frame converted to float and back each call as a PyTorch user does, and
the interpolation alone on a float tensor), cv2.resize and FFmpeg's scaler (PyAV's reformat).

    python benchmarks/scale.py [--frames 200] [--json PATH]

GPU times are CUDA-event medians of 7 runs of ``--frames`` frames after a warm-up, rotating over
four 4K frames (more than the 50 MB L2 holds); host times are medians of 5 calls. The largest
difference of each route from streamconv's CPU backend on the same frame is given (PyTorch's
antialiased filters renormalise at the borders where streamconv replicates the edge; OpenCV does
not widen its kernels when shrinking but for INTER_AREA).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import av
import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

import streamconv  # noqa: E402
from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.chain.filters import parse_chain  # noqa: E402
from streamconv.bench.timing import time_launches  # noqa: E402

SOURCE, TARGET = (2160, 3840, 3), (1080, 1920)
SWSCALE = {"lanczos3": "LANCZOS", "bicubic": "BICUBIC", "bilinear": "BILINEAR", "area": "AREA"}
CV2 = {"lanczos3": cv2.INTER_LANCZOS4, "bicubic": cv2.INTER_CUBIC, "bilinear": cv2.INTER_LINEAR,
       "area": cv2.INTER_AREA}


def gpu_ms(run, frames: int) -> float:
    """Median ms per frame of ``run(i)`` called ``frames`` times, timed with CUDA events."""
    import torch

    for i in range(8):
        run(i)
    samples = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(frames):
            run(i)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / frames)
    return statistics.median(samples)


def host_ms(run) -> float:
    run()
    samples = []
    for _ in range(5):
        begin = time.perf_counter()
        run()
        samples.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(samples)


def worst(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.abs(got.astype(np.int64) - want.astype(np.int64)).max())


def torch_rows(frames_gpu, want: dict, frames: int) -> list[dict]:
    """F.interpolate(antialias=True) on the GPU: from uint8 HWC and back, and float NCHW alone."""
    import torch
    import torch.nn.functional as F

    rows = []
    floats = [f.permute(2, 0, 1).unsqueeze(0).float() for f in frames_gpu]
    for mode, ours in (("bilinear", "bilinear"), ("bicubic", "bicubic")):
        def resize(frame, mode=mode):
            x = frame.permute(2, 0, 1).unsqueeze(0).float()
            y = F.interpolate(x, size=TARGET, mode=mode, antialias=True, align_corners=False)
            return y.round_().clamp_(0, 255).to(torch.uint8).squeeze(0).permute(1, 2, 0).contiguous()

        lsb = worst(resize(frames_gpu[0]).cpu().numpy(), want[ours])
        rows.append({"route": f"torch F.interpolate {mode} antialias, uint8 in and out", "device": "gpu",
                     "ms": gpu_ms(lambda i, r=resize: r(frames_gpu[i % 4]), frames), "lsb_vs_ours": lsb})
        alone = gpu_ms(lambda i, m=mode: F.interpolate(floats[i % 4], size=TARGET, mode=m, antialias=True), frames)
        rows.append({"route": f"torch F.interpolate {mode} antialias, float NCHW alone", "device": "gpu",
                     "ms": alone, "lsb_vs_ours": None})
    return rows


def streamconv_rows(frames_gpu, host: np.ndarray, want: dict, frames: int) -> list[dict]:
    """The scale stage's kernel alone (4 rotating slots) and Filter on torch device frames."""
    import torch

    rows = []
    stream = torch.cuda.current_stream()
    for kernel in ("lanczos3", "bicubic", "bilinear", "area"):
        spec = f"scale:w={TARGET[1]},h={TARGET[0]},kernel={kernel}"
        with streamconv.Filter(spec, backend="cuda") as gpu:
            lsb = worst(torch.from_dlpack(gpu(frames_gpu[0])).cpu().numpy(), want[kernel])
            engine = gpu._engine
            slots = engine.allocate_slots(SOURCE, 4)
            for slot in slots:
                slot.host_in[:] = host
            with engine.activated():
                for slot in slots:
                    slot.device.upload(None)  # now, synchronously
                kernel_ms = time_launches(engine, slots) * 1e3
            engine.release_slots(slots)
            outs = [torch.empty((*TARGET, 3), dtype=torch.uint8, device="cuda") for _ in range(4)]
            api_ms = gpu_ms(lambda i, o=outs, g=gpu: g.apply_into(o[i % 4], frames_gpu[i % 4], stream=stream),
                            frames)
        rows.append({"route": f"streamconv scale {kernel}, kernel alone", "device": "gpu", "ms": kernel_ms,
                     "lsb_vs_ours": lsb})
        rows.append({"route": f"streamconv scale {kernel}, Filter.apply_into(torch, stream=)", "device": "gpu",
                     "ms": api_ms, "lsb_vs_ours": lsb})
    return rows


def host_rows(host: np.ndarray, want: dict) -> list[dict]:
    """cv2.resize, swscale through PyAV and streamconv's CPU backend, on the host."""
    rows = []
    picture = av.VideoFrame.from_ndarray(host, format="rgb24")
    for kernel in ("lanczos3", "bicubic", "bilinear", "area"):
        size = (TARGET[1], TARGET[0])
        theirs = cv2.resize(host, size, interpolation=CV2[kernel])
        rows.append({"route": f"cv2.resize ({kernel})", "device": "cpu", "lsb_vs_ours": worst(theirs, want[kernel]),
                     "ms": host_ms(lambda k=kernel, s=size: cv2.resize(host, s, interpolation=CV2[k]))})
        sws = picture.reformat(width=size[0], height=size[1], format="rgb24", interpolation=SWSCALE[kernel])
        rows.append({"route": f"swscale {SWSCALE[kernel]} (PyAV reformat)", "device": "cpu",
                     "lsb_vs_ours": worst(sws.to_ndarray(), want[kernel]),
                     "ms": host_ms(lambda k=kernel, s=size: picture.reformat(width=s[0], height=s[1], format="rgb24",
                                                                             interpolation=SWSCALE[k]))})
        backend = CpuBackend(parse_chain([f"scale:w={size[0]},h={size[1]},kernel={kernel}"]))
        out = np.empty((*TARGET, 3), np.uint8)
        rows.append({"route": f"streamconv cpu backend ({kernel})", "device": "cpu", "lsb_vs_ours": 0,
                     "ms": host_ms(lambda b=backend, o=out: b.apply_into(o, host))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    torch = needs.torch_gpu()
    needs.gpu()
    rng = np.random.default_rng()
    hosts = [rng.integers(0, 256, SOURCE, dtype=np.uint8) for _ in range(4)]
    frames_gpu = [torch.from_numpy(h).cuda() for h in hosts]
    want = {kernel: CpuBackend(parse_chain([f"scale:w={TARGET[1]},h={TARGET[0]},kernel={kernel}"])).apply(hosts[0])
            for kernel in SWSCALE}
    rows = streamconv_rows(frames_gpu, hosts[0], want, args.frames)
    rows += torch_rows(frames_gpu, want, args.frames)
    rows += host_rows(hosts[0], want)
    print(f"4K -> 1080p RGB 8-bit on {torch.cuda.get_device_name()}; host: {cv2.getNumThreads()} OpenCV threads")
    print(f"{'route':<62}{'device':>7}{'ms':>10}{'LSB vs ours':>13}")
    for row in rows:
        lsb = "-" if row["lsb_vs_ours"] is None else str(row["lsb_vs_ours"])
        print(f"{row['route']:<62}{row['device']:>7}{row['ms']:>10.4f}{lsb:>13}")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(needs.run(main))
