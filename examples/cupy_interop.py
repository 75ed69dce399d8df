"""Filter CuPy arrays on the GPU with streamconv: no copy to the host and back.

    python examples/cupy_interop.py [--filter SPEC] [--size WxH] [--frames N]

Frames are (H, W, 3) uint8 CuPy arrays in device memory. ``Filter(...)(frame)`` reads them
where they are and returns a ``streamconv.DeviceFrame`` on the same GPU, which
``cupy.asarray`` views without a copy. ``stream=`` queues the work on your CuPy stream, so the
loop never waits for the GPU; ``apply_into`` writes into an array you keep.
"""

import argparse
import sys

import numpy as np

import streamconv

try:
    import cupy
except ImportError as exc:  # one line naming what is missing, not a traceback
    sys.exit(f"cupy_interop.py needs CuPy (pip install cupy-cuda12x, or cupy-cuda13x "
             f"for a CUDA 13 driver): {exc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", default="gaussian:sigma=2")
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--frames", type=int, default=100)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    try:
        blur = streamconv.Filter(args.filter, backend="cuda")
    except streamconv.BackendUnavailableError as exc:
        sys.exit(f"cupy_interop.py needs a GPU streamconv can use: {exc}")

    frames = cupy.random.randint(0, 256, (4, height, width, 3), dtype=cupy.uint8)  # made on the GPU
    stream = cupy.cuda.Stream(non_blocking=True)
    with blur:
        first = cupy.asarray(blur(frames[0]))  # a DeviceFrame viewed as a CuPy array: no copy
        out = cupy.empty_like(frames[0])
        brightness = cupy.zeros((), cupy.float64)
        with stream:
            for index in range(args.frames):
                blur.apply_into(out, frames[index % 4], stream=stream)  # queued; the loop goes on
                brightness += out.mean()  # CuPy work on the same stream, after the filter
        stream.synchronize()
        host = blur(cupy.asnumpy(frames[0]))  # the same Filter on a host frame, for comparison
    same = bool(np.array_equal(cupy.asnumpy(first), host))
    print(f"filtered {args.frames} {width}x{height} CuPy frames with {args.filter}; "
          f"mean brightness {float(brightness) / args.frames:.2f}; equal to the host path: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
