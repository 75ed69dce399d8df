"""Filter the frames of your own cv2.VideoCapture loop with streamconv, overlapped with capture.

    python examples/opencv_embed.py [VIDEO_OR_CAMERA_INDEX] [--filter SPEC] [--show] [--output OUT.avi]
    python examples/opencv_embed.py media/sample.mp4 --filter edge --output edges.avi

OpenCV delivers BGR frames (H x W x 3 uint8, host memory); per-channel filters give the
same result for BGR and RGB, so frames go in and come out as OpenCV expects.
"""

import argparse
import sys

import cv2

import streamconv


def captured_frames(capture: cv2.VideoCapture, stream: streamconv.StreamFilter, limit: int | None):
    """Yield BGR frames until the capture ends (or ``limit`` frames). After the first, each is
    read straight into the filter's page-locked input buffer, so submitting it copies nothing
    (OpenCV writes into the array it is given when the size and type match)."""
    ok, frame = capture.read()
    count = 0
    while ok and (limit is None or count < limit):
        count += 1
        yield frame
        ok, frame = capture.read(stream.input_buffer(frame.shape))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default="0", help="a video file, or a camera index (default 0)")
    parser.add_argument("--filter", default="edge", help="filter spec (default edge)")
    parser.add_argument("--show", action="store_true", help="show the filtered frames in a window (q quits)")
    parser.add_argument("--output", help="record the filtered frames with cv2.VideoWriter (MJPG)")
    parser.add_argument("--max-frames", type=int, help="stop after N frames")
    args = parser.parse_args()
    if args.show:
        from streamconv.io.sinks.display import check_display

        try:
            check_display()  # Qt aborts the whole process when it finds no display
        except streamconv.DisplayError as exc:
            print(f"cannot show the frames: {exc}", file=sys.stderr)
            return 1

    capture = cv2.VideoCapture(int(args.source) if args.source.isdigit() else args.source)
    if not capture.isOpened():
        print(f"cannot open {args.source}", file=sys.stderr)
        return 1
    writer = None
    if args.output:
        fps = capture.get(cv2.CAP_PROP_FPS) or 30.0
        size = (int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
        writer = cv2.VideoWriter(args.output, cv2.VideoWriter_fourcc(*"MJPG"), fps, size)

    count = 0
    with streamconv.StreamFilter(args.filter, ring=3) as stream:  # CUDA when available, else CPU
        for filtered in stream.map(captured_frames(capture, stream, args.max_frames)):
            count += 1
            if writer is not None:
                writer.write(filtered)
            if args.show:
                cv2.imshow("streamconv", filtered)
                if cv2.waitKey(1) & 0xFF in (ord("q"), 27):
                    break
    capture.release()
    if writer is not None:
        writer.release()
    if args.show:
        cv2.destroyAllWindows()
    print(f"filtered {count} frames with {args.filter} ({stream.backend} backend)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
