"""Demuxing an input's chosen streams with PyAV, read to the end even where streams appear
mid-input.

A demuxer may add streams after the input was opened: an MPEG-TS program that begins mid-file
(a recording across a channel change, two recordings joined), an FLV tag of a kind not seen
before, or damage that reads as either. PyAV knows only the streams of the opening: it never
hands on a new stream's packets, and at the end of the input its ``demux()`` reads its table of
the chosen streams past its end, which fails with an IndexError (PyAV 18 and before) or not,
depending on the bytes found there. :class:`Demux` ends there as at the end of the input: the
known streams' packets have all been given by then. FFmpeg's own command line likewise keeps
the streams of the opening (with a warning); what the new streams held is damage to report
(see streamconv.io.ffmpeg.damage).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import av


class Demux:
    """The packets of ``streams`` (PyAV streams of ``container``, an open input) in the order
    read, ending with each stream's empty flush packet as PyAV's ``demux()`` gives them; errors
    of reading the input are raised as PyAV raises them.

    Attributes:
        streams_added: PyAV failed at the end of the input on streams the demuxer added after
            the opening (True), or not (it may also end without failing: see the module).
    """

    def __init__(self, container, streams: Iterable) -> None:
        self._packets: Iterator[av.Packet] = container.demux(list(streams))
        self.streams_added = False

    def __iter__(self) -> Demux:
        return self

    def __next__(self) -> av.Packet:
        try:
            return next(self._packets)
        except IndexError:  # PyAV's table of chosen streams read past its end, at the input's end
            self.streams_added = True
            raise StopIteration from None
