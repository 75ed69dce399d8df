"""Frame sources and sinks: sources fill a pipeline's slots, sinks take the filtered frames from
them.

Sources (each a context manager with an idempotent ``close()``; ``read_into(buffer)`` writes a
frame into a slot's host buffer, iteration yields new arrays): :mod:`.source` (the base class),
:mod:`.pattern` (the synthetic test pattern, plain and live), :mod:`.arrays` (NumPy arrays),
:mod:`.file` (files and streams, decoded by PyAV), :mod:`.demuxed` (standard input, raw video,
image sequences), :mod:`.live` (the newest-frame policy, and real-time pacing), :mod:`.camera`
(OpenCV cameras).

Sinks (``send(frame, meta)``): :mod:`.sink` (the base class, null, callback, fan-out),
:mod:`.filesink` (encoding with PyAV, into a file, a pipe or an image sequence: :mod:`.targets`,
:mod:`.formats`), :mod:`.display` (an OpenCV window).

Beside them: :mod:`.open` (``open_source`` and ``open_sink``: a spec or path to a source or
sink), :mod:`.colour` and :mod:`.yuv` (colour tags and conversion, YUV planes in a slot),
:mod:`.streamcopy` (audio and subtitle packets copied from an input to a file output),
:mod:`.damage` and :mod:`.ffmpeglog` (judging and counting input damage), and
:mod:`.encoder_check` (encoder settings checked before a run).

Nothing is imported here: ``import streamconv.frames.yuv`` loads only what that module needs.

Also here: :mod:`.ffmpeg`/ (what sources and sinks both ask of PyAV and libav).
"""
