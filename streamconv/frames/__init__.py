"""The contract between io and backends: slots, frame checks, and the frame maths both backends
share.

Also here: :mod:`.arguments` (checks of the arguments the library's public calls take: one of the
wrong type); :mod:`.borders` (border modes: how a filter reads pixels outside the frame);
:mod:`.colour` (colour between a file's YUV and the RGB frames the filters see: matrix and range
honoured); :mod:`.gamut` (which samples of 4:2:0 planes the conversion to RGB clips, and so which
come back exactly); :mod:`.hostcopy` (copies of large host frames on several threads: one thread
reaches about 9 GB/s); :mod:`.yuv` (planar YUV 4:2:0 frames: their layout in a slot).
"""
