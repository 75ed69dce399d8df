#!/usr/bin/env bash
# On the GPU machine, from the root of the tree under test, with .whl/ (../shared/device/prepare.sh)
# and .gst-noble/ (prepare.sh here) carried. Writes logs and JSON under $OUT.
#   GPU tests of the element, then its CPU tests (the loader's Python is the machine's 3.12 here);
#   a CUDA-memory pipeline through gst-launch-1.0 (the plugin loader's own Python);
#   the 4K throughput of the element against the same pipelines without it.
set -uo pipefail
gst_folder=${GST_NOBLE:-.gst-noble}
# shellcheck disable=SC1091
source .whl/setup.sh && source "$gst_folder/setup.sh" || exit 1
python3 -m pytest -q -rs tests/test_gst_cuda.py tests/test_gst_element.py tests/test_gst_frames.py \
  2>&1 | tee "$OUT/gst-tests.log"
# a real decoder's CUDA memory through the element, launched as a user would
python3 -c "
import sys; sys.path.insert(0, 'benchmarks'); from pipeline import make_clip; from pathlib import Path
make_clip(Path('/tmp/gst-1080p.mp4'), 1920, 1080, 60)"
gst-launch-1.0 filesrc location=/tmp/gst-1080p.mp4 ! qtdemux ! h264parse ! nvh264dec ! cudaconvert ! \
  'video/x-raw(memory:CUDAMemory),format=RGBA' ! streamconv filter='gaussian:sigma=2 -> edge' \
  backend=cuda ! cudadownload ! fakesink 2>&1 | tee "$OUT/gst-launch.log"
echo "gst-launch-1.0 exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/gst-launch.log"
python3 benchmarks/gstreamer.py --size 4K --frames 300 --runs 3 --json "$OUT/gst-4k.json" \
  2>&1 | tee "$OUT/gst-bench.log"
