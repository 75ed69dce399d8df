"""The two CUDA bindings side by side: the same frames through each, and what a call costs.

    python benchmarks/bindings.py [--bindings cuda-core,pycuda] [--launches 5000] [--json PATH]

Each binding runs in a child process of its own (STREAMCONV_BINDING set), on the same inputs
(fixed seeds), and reports:
  frames     a SHA-256 of every output of a set of runs: host frames through Filter (every
             kernel variant that takes the taps; uint8 and uint16; a convolution layer), a test
             pattern's yuv420p planes through a Pipeline, device frames (CuPy) in and out, DLPack
             out (PyTorch), nn.conv2d on float32; the digests must be equal, byte for byte
  launch us  host microseconds per launch of an empty kernel (cuda/bench/hold.cu, 0 ns), queued on one
             stream: bound once (what the backend repeats per frame) and packed per call
  frame us   host microseconds per 64x64 frame through Filter (Python and driver overhead)
Exit status 1 if the bindings' digests differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

SPECS = ["box:size=5", "gaussian:sigma=2", "sharpen", "edge", ["emboss", "box:size=3"]]


def _digest(outputs: list[np.ndarray]) -> str:
    hashed = hashlib.sha256()
    for output in outputs:
        hashed.update(str((output.shape, output.dtype.str)).encode())
        hashed.update(np.ascontiguousarray(output).tobytes())
    return hashed.hexdigest()[:16]


def host_frames(rng) -> dict[str, str]:
    """Digests of host frames through Filter: each spec under each kernel that runs it."""
    import streamconv
    from streamconv.backends.plan import KERNEL_CHOICES

    frames = {np.uint8: rng.integers(0, 256, (270, 481, 3), dtype=np.uint8),
              np.uint16: rng.integers(0, 65536, (135, 241, 4), dtype=np.uint16)}
    digests = {}
    for dtype, frame in frames.items():
        for spec in SPECS:
            for kernel in KERNEL_CHOICES:
                try:
                    with streamconv.Filter(spec, backend="cuda", kernel=kernel) as gpu:
                        digests[f"{spec} {kernel} {np.dtype(dtype).name}"] = _digest([gpu(frame)])
                except streamconv.StreamconvError:
                    continue  # a kernel that cannot run these taps or samples
    return digests


def pipeline_planes() -> str:
    """A test pattern's frames through a Pipeline (yuv420p planes, converted on the GPU)."""
    import streamconv

    seen: list[np.ndarray] = []
    streamconv.Pipeline("test:320x240,frames=12", ["gaussian:sigma=1", "sharpen"], None,
                        backend="cuda",
                        on_frame=lambda frame, meta: seen.append(np.array(frame))).run()
    return _digest(seen)


def device_frames(rng) -> dict[str, str]:
    """CuPy frames in and out, DLPack out to PyTorch, nn.conv2d on device and host arrays."""
    import streamconv
    from streamconv import nn

    digests = {}
    x = rng.standard_normal((1, 3, 40, 52)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    digests["nn host"] = _digest([nn.conv2d(x, w, padding=1, backend="cuda")])
    try:
        import cupy
    except ImportError:
        return digests
    frame = cupy.asarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8))
    with streamconv.Filter("sharpen", backend="cuda") as gpu:
        result = gpu(frame)
        digests["cupy in, device frame out"] = _digest([cupy.asarray(result).get()])
        try:
            import torch

            digests["dlpack out (torch)"] = _digest([torch.from_dlpack(result).cpu().numpy()])
        except ImportError:
            pass
    digests["nn device"] = _digest([cupy.asarray(nn.conv2d(cupy.asarray(x), w, padding=1)).get()])
    return digests


def launch_costs(launches: int) -> dict[str, float]:
    """Host us per launch of the empty kernel: bound once, and packed per call."""
    from streamconv.gpu import loader as kernel_loader
    from streamconv.backends.cuda.backend import CudaBackend

    with CudaBackend([]) as backend, backend.activated():
        gpu = backend.gpu
        module = kernel_loader.load_module("hold", {}, backend.arch, gpu)
        kernel, stream = module.kernel("hold_stream", "Q"), gpu.stream()
        bound = kernel.bind((1, 1, 1), (1, 1, 1), 0)
        costs = {}
        packed = lambda: kernel.launch(stream, (1, 1, 1), (1, 1, 1), 0)  # noqa: E731
        for name, launch in (("bound", lambda: bound(stream)), ("packed per call", packed)):
            for _ in range(200):
                launch()
            stream.synchronize()
            begin = time.perf_counter()
            for _ in range(launches):
                launch()
            costs[f"launch us ({name})"] = (time.perf_counter() - begin) / launches * 1e6
            stream.synchronize()
    return costs


def frame_cost(rng, frames: int = 2000) -> float:
    """Host us per 64x64 frame through Filter (the chain's kernels included)."""
    import streamconv

    frame = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    out = np.empty_like(frame)
    with streamconv.Filter("box", backend="cuda") as gpu:
        for _ in range(200):
            gpu.apply_into(out, frame)
        begin = time.perf_counter()
        for _ in range(frames):
            gpu.apply_into(out, frame)
        return (time.perf_counter() - begin) / frames * 1e6


def child(launches: int) -> dict:
    """What one binding reports (run with STREAMCONV_BINDING set)."""
    from streamconv.gpu.binding import binding

    rng = np.random.default_rng(44)
    started = time.perf_counter()
    report = {"binding": f"{binding().name} ({binding().describe()})", "frames": host_frames(rng)}
    report["frames"]["pipeline planes"] = pipeline_planes()
    report["frames"].update(device_frames(rng))
    report["seconds to check"] = time.perf_counter() - started
    report.update(launch_costs(launches))
    report["frame us (64x64 Filter)"] = frame_cost(rng)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bindings", default="cuda-core,pycuda")
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--json", default="bindings.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.launches)))
        return 0
    needs.gpu()
    reports = {}
    for name in args.bindings.split(","):
        command = [sys.executable, __file__, "--child", "--launches", str(args.launches)]
        done = subprocess.run(command, capture_output=True, text=True,
                              env={**os.environ, "STREAMCONV_BINDING": name})
        if done.returncode != 0:
            print(f"{name}: failed\n{done.stderr[-3000:]}")
            return 1
        reports[name] = json.loads(done.stdout.splitlines()[-1])
    Path(args.json).write_text(json.dumps(reports, indent=1), encoding="utf-8")
    return report(reports)


def report(reports: dict) -> int:
    """Print the costs and the digest comparison; 1 where the frames differ."""
    names = list(reports)
    for key in [k for k in reports[names[0]] if k != "frames"]:
        cells = (reports[n][key] for n in names)
        print(f"{key:<28}" + "".join(f"  {cell:>10.2f}" if isinstance(cell, float) else f"  {cell}"
                                     for cell in cells))
    frames = [reports[n]["frames"] for n in names]
    differing = [key for key in frames[0] if any(f.get(key) != frames[0][key] for f in frames[1:])]
    print(f"frames: {len(frames[0])} runs, {len(frames[0]) - len(differing)} byte-identical across "
          f"{', '.join(names)}" + (f"; differ: {', '.join(differing)}" if differing else ""))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(needs.run(main))
