"""What sources and sinks both ask of PyAV and libav.

Modules: :mod:`.container` (opening an input container for decoding, and what its video stream tells
before decoding); :mod:`.copyout` (the input's audio and subtitle streams copied into an output
container); :mod:`.damage` (judging an input's damage, from what its container and streams declare
and what reading); :mod:`.demux` (demuxing an input's chosen streams with PyAV);
:mod:`.encoder_check` (check encoder settings before a run starts: a bad ``--preset`` or ``--crf``
is refused); :mod:`.formats` (which container and encoder an output gets, and what kind of output it
is); :mod:`.log` (FFmpeg's messages: the reason of an error, and counting its reports of damaged
input); :mod:`.metadata` (the input's tags carried to a file output: the container's, the video
stream's); :mod:`.muxer_file` (the file object a muxer writes through PyAV: a failed write or seek
comes back to); :mod:`.muxer_options` (which options a muxer has, asked of the libavformat that PyAV
runs on); :mod:`.signalling` (colour signalling an encoder writes into the bitstream only when told:
HDR and the); :mod:`.streamcopy` (audio and subtitle streams copied unchanged from an input file to
a file output).
"""
