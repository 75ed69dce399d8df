"""FFmpeg's messages: the reason of an error, and counting its reports of damaged input.

Some damage reaches Python only as FFmpeg log lines: a Matroska file that ends early, an
MPEG-TS packet cut short, a slice the H.264 decoder concealed. PyAV forwards FFmpeg's log
to the ``libav.<component>`` loggers once a level is set; a DamageLog counts the lines from
one input's demuxer and decoders. If the application has not set PyAV's level itself, the
watch sets it for its duration and keeps the lines out of the application's log.
"""

from __future__ import annotations

import logging

import av.logging

def ffmpeg_reason(exc: BaseException) -> str:
    """The reason of a PyAV error (its strerror), without the file name and error number it repeats."""
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).strip() or type(exc).__name__


_WORDS = ("corrupt", "truncat", "prematurely", "invalid", "missing", "error")


class DamageLog(logging.Handler):
    """Counts FFmpeg log lines about damage from the named components while installed.

    Args:
        components: FFmpeg component names to listen to, e.g. ``{"mpegts", "h264"}`` (the
            input's demuxer and decoders; an encoder's lines are not about the input).

    Attributes:
        count: lines counted: errors, and warnings that speak of damage.
    """

    def __init__(self, components: set[str]) -> None:
        super().__init__(level=logging.WARNING)
        self.components = set(components)
        self.count = 0
        self._logger = logging.getLogger("libav")
        self._restore: tuple | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.partition(".")[2] not in self.components:
            return
        if record.levelno >= logging.ERROR or any(w in record.getMessage().lower() for w in _WORDS):
            self.count += 1

    def start(self) -> "DamageLog":
        """Install the handler (and PyAV's log level, if none is set)."""
        if av.logging.get_level() is None:
            self._restore = (None, self._logger.propagate)
            av.logging.set_level(av.logging.WARNING)
            self._logger.propagate = False  # FFmpeg's wording stays out of streamconv's output
        self._logger.addHandler(self)
        return self

    def stop(self) -> None:
        """Remove the handler and put PyAV's level back; safe to call more than once."""
        self._logger.removeHandler(self)
        if self._restore is not None:
            level, propagate = self._restore
            self._restore = None
            av.logging.set_level(level)
            self._logger.propagate = propagate
