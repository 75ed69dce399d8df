"""streamconv's exceptions, each with the process exit code the CLI maps it to.

Every class also subclasses the built-in exception a Python caller would expect
(ValueError for bad arguments, OSError for files, RuntimeError for the GPU), so
library users can catch either.
"""

from __future__ import annotations


class StreamconvError(Exception):
    """Base class of every error streamconv raises on purpose; raised as itself where none of
    its subclasses fits."""

    exit_code = 1


class FilterSpecError(StreamconvError, ValueError):
    """A filter spec, its parameters or its taps are malformed."""

    exit_code = 3


class SettingsError(StreamconvError, ValueError):
    """A setting of a run is unknown, out of range or does not apply: a backend, kernel, border,
    decoder, colour path, ring depth, timeout, devices or a combination of them (a filter's own
    parameters are a :class:`FilterSpecError`)."""

    exit_code = 3


class PresetError(StreamconvError, ValueError):
    """A pipeline preset cannot be found or does not validate."""

    exit_code = 3


class FrameFormatError(StreamconvError, ValueError):
    """A frame has the wrong shape or size for where it is used."""

    exit_code = 3


class ShapeError(StreamconvError, ValueError):
    """A tensor given to a :mod:`streamconv.nn` layer has the wrong shape or dtype for it."""

    exit_code = 3


class FrameTypeError(StreamconvError, TypeError):
    """A frame has the wrong dtype or is not an array."""

    exit_code = 3


class FrameDeviceError(StreamconvError, ValueError):
    """A device frame is somewhere the filter cannot use it: on another GPU, or host memory
    that claims to be device memory."""

    exit_code = 3


class InputError(StreamconvError, OSError):
    """The input is missing, unreadable, or not a video FFmpeg can decode."""

    exit_code = 4


class NoVideoStreamError(InputError):
    """The input opened but holds no video stream."""

    exit_code = 5


class OutputError(StreamconvError, OSError):
    """The output cannot be written: it exists, equals the input, or its folder is missing."""

    exit_code = 6


class BackendUnavailableError(StreamconvError, RuntimeError):
    """The requested compute backend cannot run here (no CUDA binding, no GPU, no kernel for it
    and no compiler)."""

    exit_code = 7


class KernelCompileError(BackendUnavailableError):
    """NVRTC or nvcc rejected a kernel; the message carries the compiler's output."""


class VirtualCameraError(BackendUnavailableError):
    """A virtual camera output cannot be opened: pyvirtualcam is missing, or no virtual camera
    device (v4l2loopback on Linux) is there."""


class StreamError(StreamconvError, RuntimeError):
    """Decoding or encoding failed part-way through a run."""

    exit_code = 8


class GpuFaultError(StreamError):
    """The GPU failed part-way through a run (a kernel launch or a copy); the message names the
    frame."""

    exit_code = 12


class CameraError(InputError):
    """A camera cannot be opened or delivers no first frame; the message says what was tried."""

    exit_code = 9


class CameraLostError(StreamError):
    """A camera stopped delivering frames and reopening it failed every time."""

    exit_code = 10


class InputLostError(StreamError):
    """A network input read with reconnecting stalled or ended, and reopening it failed until
    the time allowed ran out; the frames written before are kept."""

    exit_code = 8


class DisplayError(StreamconvError, RuntimeError):
    """No window can be shown: no display server, or an OpenCV build without a GUI."""

    exit_code = 11


EXIT_DAMAGED_INPUT = 13
"""A run that finished, output written, but skipped damaged parts of its input."""

EXIT_SOME_FAILED = 14
"""A batch whose every input ended, but some failed (or were aborted); the manifest says which."""

class Interrupted(KeyboardInterrupt):
    """A signal ended the work at once: SIGINT or SIGTERM during start-up, or a second one
    while a run was finishing (whatever was half written is discarded).

    A KeyboardInterrupt, so callers that catch Ctrl-C catch it too.

    Attributes:
        signum: the signal's number.
        exit_code: 128 + signum, as a shell reports a process the signal ended (130, 143).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


def run_exit_code(damaged: bool, stop_signal: int | None) -> int:
    """The exit code of one run that ended without an error: 128 + the signal that stopped it,
    EXIT_DAMAGED_INPUT when its input was damaged, else 0."""
    if stop_signal is not None:
        return 128 + stop_signal
    return EXIT_DAMAGED_INPUT if damaged else 0


EXIT_INTERRUPTED = 130
