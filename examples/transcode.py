"""Transcode a video file through a filter chain from Python, and print the per-stage timings.

    python examples/transcode.py INPUT OUTPUT [FILTER ...]
    python examples/transcode.py media/sample.mp4 /tmp/soft.mp4 gaussian:sigma=2 sharpen:amount=0.5
"""

import sys

import streamconv


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    source, output, *filters = sys.argv[1:]
    pipeline = streamconv.Pipeline(source, filters or ["edge"], output, progress=True,
                                   sink_options={"overwrite": True, "crf": 20})
    stats = pipeline.run()
    print(stats.format_table())


if __name__ == "__main__":
    main()
