"""A PyTorch model fed by streamconv on the GPU: frames never leave device memory.

    python examples/torch_interop.py [--filter SPEC] [--size WxH] [--frames N]

Each frame is an (H, W, 3) uint8 CUDA tensor (from a camera, a decoder or another model).
streamconv filters it where it is; ``torch.from_dlpack`` turns the result into a tensor
without a copy, which becomes the model's (1, 3, H, W) float input. ``stream=`` orders the
filter on PyTorch's current stream, so the loop queues work and never waits for it.
"""

import argparse
import sys

import streamconv

try:
    import torch
except ImportError as exc:  # one line naming what is missing, not a traceback
    sys.exit(f"torch_interop.py needs PyTorch with CUDA (pip install torch): {exc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", default="sharpen")
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--frames", type=int, default=50)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    if not torch.cuda.is_available():
        sys.exit("torch_interop.py needs a GPU PyTorch can use: torch.cuda.is_available() is False")
    try:
        sharpen = streamconv.Filter(args.filter, backend="cuda")
    except streamconv.BackendUnavailableError as exc:
        sys.exit(f"torch_interop.py needs a GPU streamconv can use: {exc}")

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).cuda().eval()
    frames = torch.randint(0, 256, (4, height, width, 3), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()
    with sharpen, torch.inference_mode():
        features = []
        for index in range(args.frames):
            filtered = torch.from_dlpack(sharpen(frames[index % 4], stream=stream))  # no copy
            model_input = filtered.permute(2, 0, 1).unsqueeze(0).float().div(255)
            features.append(model(model_input))
        torch.cuda.synchronize()
        check = torch.from_dlpack(sharpen(frames[0])).cpu().numpy()
        # the host path gives the same bytes
        same = (check == sharpen(frames[0].cpu().numpy())).all()
    print(f"ran {args.frames} {width}x{height} frames through {args.filter} and the model; "
          f"feature shape {tuple(features[-1].shape)}; equal to the host path: {bool(same)}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
