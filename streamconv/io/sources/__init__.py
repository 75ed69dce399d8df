"""Frame sources: each fills a pipeline's slots.

Modules: :mod:`.arrays` (frames from NumPy arrays already in host memory (tests, the library API));
:mod:`.backoff` (the pauses between attempts to reopen a lost input: a growing wait, within a
budget); :mod:`.camera` (a camera read with OpenCV's VideoCapture: the newest-frame policy,
reconnects); :mod:`.decoder_tail` (the last frames of a damaged stream that libavcodec's frame
threads lose, decoded again); :mod:`.demuxed` (inputs read with a named demuxer and its options:
standard input, raw video); :mod:`.file` (the file source: a video file or stream (any input FFmpeg
reads) decoded by PyAV); :mod:`.filedecode` (a file source's decoding: the video stream's packets
demuxed and decoded one by one); :mod:`.live` (live sources: frames that arrive on their own clock
and are never queued); :mod:`.nvdec`/ (the NVDEC source: decoding on the GPU through
PyNvVideoCodec); :mod:`.pattern` (the synthetic test pattern: colour gradients, a scrolling
checkerboard and a moving box); :mod:`.readguard` (a source whose read can block in C for ever: a
network input that sends nothing more); :mod:`.reconnect` (a network input that survives drops:
reopened with a growing pause when it stalls or ends); :mod:`.segment` (one stretch of a video file,
from a keyframe to just before a later one: the source of); :mod:`.source` (the Source base class:
what every frame source gives a pipeline); :mod:`.trim` (a stretch of an input, cut as ``ffmpeg -ss
START -t DURATION -i IN`` cuts it when the).
"""
