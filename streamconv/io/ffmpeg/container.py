"""Opening an input container for decoding, and what its video stream tells before decoding.

:func:`open_container` opens any input FFmpeg reads, on FFmpeg's hardware decoder when asked
(``--hwaccel``); the helpers read the frame count a stream declares and the display matrix
(rotation, mirroring) a decoded frame carries.
"""

from __future__ import annotations

import struct
import time
from fractions import Fraction

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av
from av.codec.hwaccel import HWAccel, hwdevices_available
from av.sidedata.sidedata import Type as SideData


from ...errors import InputError, NoVideoStreamError, SettingsError
from ...interrupts import wait_interruptibly
from ...files.numbered import START_SEARCH, field_count, first_beyond_search, is_pattern
from ...files.inputs import local_path
from .log import ffmpeg_reason, opening

NETWORK_TIMEOUT = 10.0
"""Seconds a network input may send nothing before the run gives up (``--timeout``)."""
MAX_TIMEOUT = 1e6
"""Longest timeout, in seconds (11.6 days; FFmpeg counts it in int64 microseconds). 0 waits
forever."""
SILENCE_BOUNDED = ("tcp", "http", "https", "tls", "rtmp")
"""Protocols whose opening waits for data only in reads that ``rw_timeout`` bounds, so that a
server which says nothing is given up on: their opening is bounded by silence alone. A live
stream's probe reads seconds of it in real time, longer than a short timeout while data flows.
Others (RTSP's and RTMPT's handshakes, MMSH, UDP with nothing sent) wait outside those reads:
the whole opening is bounded."""


def stream_refusal(videos, index: int, path: str, truncated: str | None) -> InputError | None:
    """Why video stream ``index`` of ``videos`` (an input's, at ``path``) cannot be decoded, or
    None: there is none (``truncated``: what cut the file short, if anything), no stream ``index``,
    or FFmpeg cannot tell its codec (a demuxer that does not fit the file: image2 on a video)."""
    if not videos:
        if truncated:
            return InputError(f"no video stream could be read from {path}: {truncated}")
        return NoVideoStreamError(f"no video stream in input: {path}")
    if not 0 <= index < len(videos):
        return InputError(f"video stream {index} requested, input has {len(videos)}: {path}")
    if videos[index].codec_context is None:
        return InputError(f"no decoder for video stream {index} of {path}: FFmpeg cannot tell "
                          "its codec (is --input-format the right one?)")
    return None


def open_input(path: str, timeout: float | None, hwaccel: str | None, options: dict | None, *,
               format: str | None = None, local_check: bool = True, hint: str = ""):
    """Open a source's input: (the container, the timeout in force or None).

    Args:
        path: a file, URL, pipe or pattern FFmpeg reads.
        timeout: seconds; None: NETWORK_TIMEOUT for URLs, no limit otherwise; 0: no limit. As
            ``rw_timeout`` (unless ``options`` has one) it bounds every wait for data; the whole
            opening too, except over the :data:`SILENCE_BOUNDED` protocols.
        hwaccel, format: as :func:`open_container`.
        options: FFmpeg options of the demuxer and protocol.
        local_check: a path without ``://`` must be an existing file (False for a pipe or pattern,
            where FFmpeg says what is missing).
        hint: appended to the message when FFmpeg cannot open it.

    Raises:
        InputError: missing, a folder, unreadable or not openable; SettingsError: a timeout
            out of range.
    """
    # long: its docstring, and each of its long messages wrapped within 100 characters
    local = local_path(path) if local_check else None  # file:NAME is NAME, as FFmpeg reads it
    if local is not None:
        try:
            if not local.exists():
                raise InputError(f"input not found: {path}")
            if local.is_dir():
                raise InputError(f"input is a directory, not a video: {path}")
        except OSError as exc:  # a name the OS refuses: too long, a loop of links
            raise InputError(f"cannot open input {path}: {exc.strerror or exc}") from None
    if timeout is None:
        timeout = NETWORK_TIMEOUT if "://" in path else 0
    if not 0 <= timeout <= MAX_TIMEOUT:  # NaN fails it too
        raise SettingsError(f"timeout must be 0 to {MAX_TIMEOUT:g} seconds (0: wait forever), "
                            f"got {timeout}")
    options = dict(options or {})
    silence_only = False  # the opening bounded by rw_timeout alone, not as a whole
    if timeout and "rw_timeout" not in options:
        # rw_timeout ends a stalled read; PyAV's timeout bounds the opening whole, where
        # rw_timeout may not reach.
        options["rw_timeout"] = str(int(timeout * 1e6))
        silence_only = path.partition("://")[0].lower() in SILENCE_BOUNDED
    started = time.monotonic()
    try:
        return (open_container(path, options, timeout or None, hwaccel, format,
                               bound_opening=not silence_only), timeout or None)
    except InputError:
        raise
    except PermissionError:
        raise InputError(f"input not readable (permission denied): {path}") from None
    except (av.FFmpegError, OSError, ValueError) as exc:
        hint += _start_number_hint(path, options)
        raise InputError(f"cannot open input {path}: "
                         f"{_open_failure(exc, timeout, None if silence_only else started)}"
                         f"{hint}") from None


def _open_failure(exc: BaseException, timeout: float, started: float | None) -> str:
    """Why an opening failed; naming the timeout where a handshake gave up on a silent server with
    an error of its own (RTSP's "Invalid data"), which reads as a broken stream. ``started``: when
    an opening bounded whole began (None: one bounded by silence, whose time says nothing)."""
    reason = ffmpeg_reason(exc, timeout or None)
    if timeout and started is not None and "timeout)" not in reason \
            and time.monotonic() - started >= timeout:
        reason += f" (no answer within the {timeout:g} s timeout)"
    return reason


def _start_number_hint(path: str, options: dict) -> str:
    """What to add for an image sequence that starts beyond the numbers FFmpeg looks in, or ""."""
    if "start_number" in options or not is_pattern(path) or field_count(path) != 1:
        return ""
    found = first_beyond_search(path)
    if found is None:
        return ""
    first, number = found
    return (f" (its first image is {first.name}, and FFmpeg looks for the first among the "
            f"numbers 0 to {START_SEARCH - 1}: add --input-option start_number={number})")


def open_container(path: str, options: dict, timeout: float | None, hwaccel: str | None,
                   format: str | None = None, *, bound_opening: bool = True):
    """The input container at ``path`` (FFmpeg ``options``; ``timeout`` seconds to open and read,
    None: none; ``bound_opening`` False: the opening is not bounded as a whole, only by the
    ``rw_timeout`` among ``options``; ``format``: the demuxer, None: probed), its video decoder
    on ``hwaccel`` hardware (one of :func:`hardware_decoders`) when asked.

    Raises:
        InputError: the hardware decoder is not in this FFmpeg build, or could not start.
        av.FFmpegError, OSError, ValueError: the input itself could not be opened.
    """
    with opening():  # its probe's lines are not another input's
        # FFmpeg's open waits in C (a server that accepts and never sends, a FIFO with no
        # writer): in a worker thread, so that Ctrl-C is handled at once here.
        return wait_interruptibly(
            lambda: _open(path, options, timeout, hwaccel, format, bound_opening),
            name="streamconv-open")


def _open(path: str, options: dict, timeout: float | None, hwaccel: str | None, format: str | None,
          bound_opening: bool):
    timeouts = (timeout if bound_opening else None, 2 * timeout) if timeout else None
    if hwaccel is None:
        return read_container(path, format=format, options=options, timeout=timeouts)
    if hwaccel not in hardware_decoders():
        raise InputError(f"hardware decoder {hwaccel!r} is not in this FFmpeg build; it has: "
                         f"{', '.join(hardware_decoders()) or 'none'}")
    try:
        return read_container(path, format=format, options=options, timeout=timeouts,
                              hwaccel=HWAccel(device_type=hwaccel, allow_software_fallback=True))
    except (av.FFmpegError, OSError, ValueError) as exc:
        # The same open without the hardware tells a broken input from a missing device.
        read_container(path, format=format, options=options, timeout=timeouts).close()
        raise InputError(f"hardware decoding ({hwaccel}) could not start for {path}: "
                         f"{ffmpeg_reason(exc, timeout)} (no such device here?); leave out "
                         f"--hwaccel to decode in software") from None


_METADATA = {"metadata_errors": "replace"} if int(av.__version__.split(".")[0]) < 19 else {}
"""How PyAV up to 18 is told to read metadata that is not UTF-8 (a damaged FLV's onMetaData):
with replacement characters, rather than refusing the whole input; PyAV 19 keeps such bytes
as surrogates itself and takes no such argument."""


def read_container(path: str, **options):
    """``av.open(path, **options)`` for reading: an input (PyAV container) whose metadata is
    not UTF-8 (damaged) is opened all the same (see :data:`_METADATA`)."""
    return av.open(path, mode="r", **options, **_METADATA)


def hardware_decoders() -> list[str]:
    """The hardware decoder kinds this FFmpeg build can open (e.g. ``["cuda", "vaapi"]``); a kind
    listed here still needs its device (a GPU) to be present."""
    return list(hwdevices_available())


def frame_count(stream, rate: Fraction) -> int | None:
    if stream.frames:
        return int(stream.frames)
    if stream.duration and stream.time_base:
        return max(1, round(float(stream.duration * stream.time_base * rate)))
    return None


def display_matrix(frame: av.VideoFrame) -> tuple[int, ...] | None:
    """The 3x3 display matrix (9 ints, FFmpeg's fixed point) a frame carries, or None: how a
    player should rotate or mirror it. streamconv filters frames as stored and passes it on."""
    data = frame.side_data.get(SideData.DISPLAYMATRIX)
    if data is None or len(bytes(data)) < 36:
        return None
    matrix = struct.unpack("<9i", bytes(data)[:36])
    return None if matrix == (65536, 0, 0, 0, 65536, 0, 0, 0, 1 << 30) else matrix
