"""Frame sinks: each takes the filtered frames.

Modules: :mod:`.display` (an OpenCV window as a sink: the filtered frame (or input | output));
:mod:`.ending` (the end of a file sink's output: finished and published whole, or removed when a
write fails or the run is aborted); :mod:`.file` (the file sink: RGB frames (or yuv420p planes)
encoded to a video file by PyAV);
:mod:`.join` (joining the encoded segments of a segmented run into one output, without re-encoding);
:mod:`.listen` (a ``tcp://HOST:PORT?listen=1`` output: streamconv waits for the receiver itself);
:mod:`.network` (network outputs: frames encoded and sent to an ``rtmp://``, ``rtsp://``,
``srt://``); :mod:`.overlay` (the text overlay of the display window and of each tile of a wall:
where it goes); :mod:`.relay` (an ``rtmp://`` or ``rtmps://`` output); :mod:`.relay_child` (the
process an ``rtmp://`` or ``rtmps://`` output is sent from); :mod:`.sequence` (image outputs: a
sequence); :mod:`.sink` (the Sink base class, and the sinks that need no library: discard (null), a
callback); :mod:`.steering` (what a sink that steers its run gets of it: a narrow handle to stop it,
swap its chain, read its status); :mod:`.targets` (where a file sink's container goes: a file
published whole, a pipe, or an image sequence); :mod:`.tiles` (one OpenCV window tiling several
sources' filtered frames in a grid); :mod:`.vcam` (the virtual camera sink: filtered frames offered
as a webcam).
"""
