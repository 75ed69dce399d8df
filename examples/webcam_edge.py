"""Live edge detection: a webcam, the GPU (or CPU) filter chain, and a window with latency.

    python examples/webcam_edge.py [--camera 0] [--size 1280x720] [--side-by-side] [--record edges.mp4]

Keys in the window: q or Esc quit, space pause, o overlay, f next filter (edge, blur, none).
The camera is read on its own thread and only its newest frame is kept, so a slow
machine drops frames rather than falling behind; the table at the end counts them.
"""

from __future__ import annotations

import argparse
import sys

import streamconv
from streamconv import DisplaySink, FanoutSink, FileSink, WebcamSource

CHAINS = [("edge", ["gaussian:sigma=0.8", "edge"]), ("blur", ["gaussian:sigma=3"]), ("none", [])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--camera", default="0", help="camera index or /dev/videoN (default 0)")
    parser.add_argument("--size", default="1280x720", help="capture size to ask for (default 1280x720)")
    parser.add_argument("--side-by-side", action="store_true", help="show the camera beside the edges")
    parser.add_argument("--record", metavar="PATH", help="also record the filtered video")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    device = int(args.camera) if args.camera.isdigit() else args.camera

    try:
        with WebcamSource(device, width=width, height=height) as camera:  # closed even if the window fails
            window = DisplaySink(title="webcam edges", side_by_side=args.side_by_side, filter_cycle=CHAINS)
            sink = window
            if args.record:
                recording = FileSink(args.record, width=camera.width, height=camera.height,
                                     frame_rate=camera.frame_rate, time_base=camera.time_base,
                                     overwrite=True)
                sink = FanoutSink([window, recording])
            stats = streamconv.Pipeline(camera, CHAINS[0][1], sink).run()
    except streamconv.StreamconvError as exc:
        print(f"webcam_edge: {exc}", file=sys.stderr)
        return exc.exit_code
    print(stats.format_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
