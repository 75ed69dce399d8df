"""How a run runs, settled once: RunSettings (backend, device, border, kernel, ring, decoder,
colour, depth, limits) and EncodeSettings (the encoder's choices), and the rule that picks the
decoder a source is opened with.

The command builds them from its options, a program by calling them (or through the keywords
of :class:`streamconv.Pipeline`, which build them), and they travel whole: to Pipeline, to
:class:`streamconv.Batch` and its worker processes (they pickle), to
:func:`streamconv.run_segments` and to :func:`streamconv.run_many`. Both are frozen and checked
when made: a setting that cannot be is refused before anything is opened.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..backends import resolve_backend
from ..backends.plan import check_kernel
from ..errors import FrameFormatError, SettingsError
from ..files.tapfiles import show_value
from ..frames.borders import DEFAULT_BORDER, check_border
from ..frames.checks import DEFAULT_MAX_PIXELS, MAX_RING, as_count
from ..io.sources.nvdec.caps import DECODERS

COLOUR_PATHS = ("auto", "backend", "host")
"""Where yuv420p video is converted to and from RGB (``Pipeline(colour=...)``, ``--colour``)."""


@dataclass(frozen=True)
class RunSettings:
    """How one stream runs (every source of a batch, a segmented or several-source run alike).

    Attributes:
        backend: ``"auto"``, ``"cpu"`` or ``"cuda"`` (see :meth:`resolved`).
        device: the CUDA device number (>= 0).
        border: the border mode of every stage (:data:`streamconv.BORDER_MODES`).
        kernel: the CUDA kernel variant, ``"auto"`` or a name of
            :data:`streamconv.backends.plan.KERNEL_CHOICES` (the cpu backend ignores it).
        ring: slots in the ring, 1 to 64; 3 lets read, filter and write overlap.
        decoder: who decodes a file or stream: ``"auto"``, ``"cpu"`` or ``"nvdec"`` (see
            :func:`decoder_to_open`).
        colour: where yuv420p video is converted to and from RGB (:data:`COLOUR_PATHS`).
        depth: bits per sample a file or stream is filtered in, 8 or 16 (None: its own).
        max_pixels: the largest frame taken, in pixels (None: no limit).
        max_frames: stop after this many frames (None: the whole source).

    Raises:
        SettingsError: a value that cannot be (an unknown name, a count out of range).
        FrameFormatError: ``max_pixels`` not an integer >= 1.
    """

    backend: str = "auto"
    device: int = 0
    border: str = DEFAULT_BORDER
    kernel: str = "auto"
    ring: int = 3
    decoder: str = "auto"
    colour: str = "auto"
    depth: int | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS
    max_frames: int | None = None

    def __post_init__(self) -> None:
        set_field = object.__setattr__  # frozen: the checked values replace the given ones
        set_field(self, "ring", as_count(self.ring, "ring", 1, MAX_RING))
        set_field(self, "device", as_count(self.device, "device", 0))
        if self.max_frames is not None:
            set_field(self, "max_frames", as_count(self.max_frames, "max_frames", 0))
        check_border(self.border)
        check_kernel(self.kernel)
        if self.max_pixels is not None:
            set_field(self, "max_pixels", as_count(self.max_pixels, "max_pixels", 1,
                                                   error=FrameFormatError))
        if self.colour not in COLOUR_PATHS:
            raise SettingsError(f"unknown colour path {show_value(self.colour)}; known: "
                                f"{', '.join(COLOUR_PATHS)}")
        if self.decoder not in DECODERS:
            raise SettingsError(f"unknown decoder {show_value(self.decoder)}; known: "
                                f"{', '.join(DECODERS)}")

    def resolved(self) -> RunSettings:
        """These settings with ``auto``'s backend decided (``cuda`` where it can run on
        ``device``, else ``cpu`` with a one-line notice).

        Raises:
            BackendUnavailableError: ``cuda`` asked for and unusable.
        """
        return replace(self, backend=resolve_backend(self.backend, device=self.device))

    def decoder_to_open(self, *, hwaccel: bool = False, cut: bool = False,
                        segmented: bool = False) -> str:
        """:func:`decoder_to_open` for these settings (backend resolved or not)."""
        return decoder_to_open(self.decoder, self.backend, hwaccel=hwaccel, cut=cut,
                               segmented=segmented)


def decoder_to_open(decoder: str, backend: str, *, hwaccel: bool = False, cut: bool = False,
                    segmented: bool = False) -> str:
    """The one rule for the decoder a file or stream is opened with
    (:func:`streamconv.io.open.open_source`'s ``decoder``):

    - FFmpeg's own hardware decoding (``hwaccel``), and a cut (``cut``: -ss, -t, -to), are
      libavcodec's: ``cpu``;
    - a segmented run opens a decoder session per segment, so NVDEC only when asked for by name
      (``nvdec``); else ``cpu``;
    - ``auto`` is NVDEC (falling back to the CPU where NVDEC cannot take the stream) for the
      cuda backend only, the CPU for any other; ``cpu`` and ``nvdec`` stand.
    """
    if hwaccel or cut:
        return "cpu"
    if segmented:
        return "nvdec" if decoder == "nvdec" else "cpu"
    return "cpu" if decoder == "auto" and backend != "cuda" else decoder


@dataclass(frozen=True)
class EncodeSettings:
    """What the encoder of every file output is told (None: its default for the container).

    Attributes:
        codec: the encoder (``libx264``, ``ffv1``, ...).
        pix_fmt: the pixel format encoded.
        crf: the constant rate factor, where the encoder has one.
        bitrate: the bit rate (``4M``), instead of ``crf``.
        preset: the encoder's speed preset.
    """

    codec: str | None = None
    pix_fmt: str | None = None
    crf: float | None = None
    bitrate: str | None = None
    preset: str | None = None

    def sink_options(self) -> dict[str, Any]:
        """The FileSink keyword options these settings give (the ones set)."""
        return {key: value for key, value in asdict(self).items() if value is not None}


def settings_from(settings: RunSettings | None, **keywords: Any) -> RunSettings:
    """``settings``, or the RunSettings that ``keywords`` (a caller's run keywords, at their
    defaults where not given) make.

    Raises:
        TypeError: both ``settings`` and a keyword that is not at its default.
    """
    given = RunSettings(**keywords)
    if settings is None:
        return given
    if given != RunSettings():
        raise TypeError("give the run's settings as settings= or as keywords, not both")
    return settings


def sink_options_with(encode: EncodeSettings | None,
                      sink_options: dict[str, Any] | None) -> dict[str, Any]:
    """A run's FileSink options: ``sink_options`` (None values left out) with ``encode``'s
    settings, where given.

    Raises:
        TypeError: ``encode`` given and ``sink_options`` naming an encoder setting too.
    """
    options = {key: value for key, value in (sink_options or {}).items() if value is not None}
    if encode is None:
        return options
    named = sorted(set(options) & {field.name for field in fields(EncodeSettings)})
    if named:
        raise TypeError(f"give the encoder's settings as encode= or in sink_options, not both "
                        f"({', '.join(named)})")
    return {**options, **encode.sink_options()}
