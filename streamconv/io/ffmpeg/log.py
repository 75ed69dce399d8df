"""FFmpeg's messages: the reason of an error, and counting its reports of damaged input.

Some damage reaches Python only as FFmpeg log lines: a Matroska file that ends early, an
MPEG-TS packet cut short, a slice the H.264 decoder concealed. PyAV forwards FFmpeg's log
to the ``libav.<component>`` loggers once a level is set; a DamageLog counts the lines from
one input's demuxer and decoders. If the application has not set PyAV's level itself, the
watches set it while any is open and keep the lines out of the application's log.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import threading

import av
import av.logging


def ffmpeg_reason(exc: BaseException, timeout: float | None = None) -> str:
    """The reason of a PyAV error (its strerror), without the file name and error number it repeats;
    for an input read with a ``timeout`` (seconds), naming it when the input stalled."""
    text = getattr(exc, "strerror", None) or str(exc)
    reason = str(text).strip() or type(exc).__name__
    stalled = isinstance(exc, (av.ExitError, TimeoutError)) or \
        getattr(exc, "errno", None) == errno.EIO
    if timeout and stalled:
        reason += f" (no data within the {timeout:g} s timeout)"
    return reason


def logged_reason(exc: BaseException) -> str:
    """The reason of a PyAV error in FFmpeg's own words where it logged a line with it (a muxer
    saying why it refuses a stream or packet), else :func:`ffmpeg_reason`."""
    logged = getattr(exc, "log", None)
    return logged[2].strip() if logged and str(logged[2]).strip() else ffmpeg_reason(exc)


def is_damaged_data(exc: BaseException, hardware: bool = False) -> bool:
    """Whether a decoder's error says its packet's data is damaged (skip it) rather than the
    decoding failed.

    Besides invalid data, a software decoder's "external library" error is zlib refusing a PNG's (or
    another image codec's) damaged compressed data; from a hardware decoder it is the device
    failing.
    """
    return isinstance(exc, av.InvalidDataError) or \
        (isinstance(exc, av.ExternalError) and not hardware)


_X264 = ("libx264", "libx264rgb")


def quiet_encoder_threads(codec: str, options: dict[str, str]) -> dict[str, str]:
    """``options`` with libx264 set to log warnings and errors only (unless they set its level).

    libavcodec has x264 log at debug level: a line for every frame, from x264's own threads. While
    a watch has PyAV's log callback installed, each line takes the interpreter lock in that
    thread, before PyAV looks at its level: the encoder waits behind Python threads, and an
    encoder freed while one of its threads waits so deadlocks (the freeing thread holds the lock
    and joins that thread).
    """
    if codec not in _X264:
        return options
    params = options.get("x264-params", "")
    if any(item.partition("=")[0] in ("log", "log-level") for item in params.split(":")):
        return options
    return {**options, "x264-params": f"{params}:log=1" if params else "log=1"}


# Watches and openings now, and the libav logger's propagation to restore once none is (set if
# the first listener had to set PyAV's level): sources can overlap, in threads or one after another.
_lock = threading.Lock()
_listeners = 0
_restore: tuple[bool, bool] | None = None  # the libav logger's propagation, PyAV's skip_repeated
_open: list["DamageLog"] = []
# inputs being opened (probed) now, whose lines come before their watch
_opening: list["_OpenLines"] = []
_heard = threading.local()  # this thread's last opening's lines, for its input's watch
_libav = logging.getLogger("libav")


def _listen() -> None:
    """One more listener (with _lock held): the first sets PyAV's level if the application has
    not, and has PyAV pass on every line: it holds back a line that repeats the one before
    (whichever input logged it) until another comes, so an input whose line repeats the last of
    an input read before (a segmented run's keyframe scan) would not hear it."""
    global _listeners, _restore
    if _listeners == 0 and av.logging.get_level() is None:
        _restore = (_libav.propagate, av.logging.get_skip_repeated())
        av.logging.set_level(av.logging.WARNING)
        av.logging.set_skip_repeated(False)
        _libav.propagate = False  # FFmpeg's wording stays out of streamconv's output
    _listeners += 1


def _unlisten() -> None:
    """One listener fewer (with _lock held): the last puts PyAV's level back."""
    global _listeners, _restore
    _listeners -= 1
    if _listeners == 0 and _restore is not None:
        av.logging.set_level(None)
        (_libav.propagate, skip), _restore = _restore, None
        av.logging.set_skip_repeated(skip)


class _OpenLines(logging.Handler):
    """FFmpeg's lines while one input opens; ``overlapped``: another input opened meanwhile, so
    they could be either's."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.overlapped = False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def opening():
    """Mark an input's opening. FFmpeg's probe may log damage (a Matroska cluster it cannot read)
    before the input's watch exists: the lines are kept for it (:func:`take_open_lines`, in this
    thread), and while any input is opening other watches count such lines as shared."""
    heard = _OpenLines()
    with _lock:
        _listen()
        for other in _opening:
            other.overlapped = heard.overlapped = True
        _opening.append(heard)
    _libav.addHandler(heard)
    try:
        yield
    finally:
        _libav.removeHandler(heard)
        with _lock:
            _opening.remove(heard)
            _unlisten()
        _heard.lines = heard


def take_open_lines() -> list[logging.LogRecord]:
    """The lines FFmpeg logged while this thread last opened an input (none if another input
    opened meanwhile), once: for that input's :meth:`DamageLog.start`."""
    heard, _heard.lines = getattr(_heard, "lines", None), None
    return heard.records if heard is not None and not heard.overlapped else []

_WORDS = ("corrupt", "truncat", "prematurely", "invalid", "missing", "error")


class DamageLog(logging.Handler):
    """Counts FFmpeg log lines about damage from the named components while installed.

    Args:
        components: FFmpeg component names to listen to, e.g. ``{"mpegts", "h264"}`` (the
            input's demuxer and decoders; an encoder's lines are not about the input).

    Attributes:
        count: lines counted: errors, and warnings that speak of damage.
        shared: such lines not counted because another open watch listens to the same component.

    FFmpeg's lines name the component, not the file: while two inputs of the same format or codec
    are read at once in one process (a batch), a line could be either's, so it is counted for
    neither (``shared``), nor is one logged while another input is being opened; their damage is
    still seen where the decoder flags it (skipped packets, concealed frames) and in the container's
    structure.
    """

    def __init__(self, components: set[str]) -> None:
        super().__init__(level=logging.WARNING)
        self.components = set(components)
        self.count = 0
        self.shared = 0
        self._paused: int | None = None  # a thread whose lines are not counted now

    def emit(self, record: logging.LogRecord) -> None:
        component = record.name.partition(".")[2]
        if component not in self.components or record.thread == self._paused:
            return
        if record.levelno >= logging.ERROR or any(w in record.getMessage().lower() for w in _WORDS):
            with _lock:
                alone = not _opening and sum(component in watch.components for watch in _open) <= 1
            if alone:
                self.count += 1
            else:
                self.shared += 1

    @contextlib.contextmanager
    def paused(self):
        """Count none of the lines this thread logs meanwhile: packets decoded again repeat
        lines heard the first time."""
        self._paused = threading.get_ident()
        try:
            yield
        finally:
            self._paused = None

    def start(self, earlier: list[logging.LogRecord] = ()) -> "DamageLog":
        """Install the handler (and PyAV's level, if none is set, until the last listener stops);
        ``earlier``: lines from before, the input's opening (:func:`take_open_lines`), judged
        now."""
        with _lock:
            _listen()
            _open.append(self)
        _libav.addHandler(self)
        self._started = True
        for record in earlier:
            self.emit(record)
        return self

    def stop(self) -> None:
        """Remove the handler; the last listener to stop puts PyAV's level back. Idempotent."""
        if not getattr(self, "_started", False):
            return
        self._started = False
        _libav.removeHandler(self)
        with _lock:
            _open.remove(self)
            _unlisten()
