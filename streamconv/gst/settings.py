"""What the element's properties say, as plain values: the filter chain a ``filter`` string names
(specs joined by ``->``, presets among them), the border, backend, kernel, device and ring
depth, and their check, made when the element starts so that a mistake stops the pipeline with
streamconv's own message before any frame. GObject's declarations of them are the element's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import (BORDER_MODES, DEFAULT_BORDER, FilterSpecError, FilterStage, SettingsError,
                load_preset, parse_chain)
from .seam import MAX_RING

CHAIN_SEPARATOR = "->"
"""Between the stages of a ``filter`` string: ``gaussian:sigma=2 -> edge`` (a spec's own
parameters are separated by commas and custom taps by semicolons)."""

PRESET_PREFIX = "preset:"
"""Marks a preset among the stages: ``preset:edge`` (shipped) or ``preset:/path/to/mine.toml``."""

BACKENDS = ("auto", "cpu", "cuda")

DEFAULT_RING_DEPTH = 3
"""Frames in flight on the cuda backend by default: one uploading, one filtering, one coming
back."""


@dataclass(frozen=True)
class Chain:
    """A ``filter`` string's meaning: its stages in order and the border its presets ask for.

    Attributes:
        stages: the filter stages (empty: frames pass unchanged).
        border: the presets' border mode, or None if none names one.
    """

    stages: tuple[FilterStage, ...]
    border: str | None


def parse_filter_chain(text: str) -> Chain:
    """The stages a ``filter`` property names: specs (``NAME[:KEY=VALUE,...]``, as ``--filter``)
    and presets (``preset:NAME`` or ``preset:FILE.toml``, as ``--pipeline``) joined by ``->``;
    empty or blank for none.

    Raises:
        FilterSpecError: an empty stage (``a -> -> b``), a bad spec, or presets asking for
            different borders.
        PresetError: a preset that is missing or does not validate.

    Example:
        >>> [stage.name for stage in parse_filter_chain("preset:edge -> box:size=3").stages]
        ['gaussian', 'edge', 'box']
    """
    if not text.strip():
        return Chain((), None)
    stages: list[FilterStage] = []
    borders: set[str] = set()
    for part in (piece.strip() for piece in text.split(CHAIN_SEPARATOR)):
        if not part:
            raise FilterSpecError(
                f"filter {text!r}: an empty stage between '{CHAIN_SEPARATOR}' separators"
            )
        if part.startswith(PRESET_PREFIX):
            preset = load_preset(part[len(PRESET_PREFIX) :])
            stages.extend(preset.filters)
            if preset.border:
                borders.add(preset.border)
        else:
            stages.extend(parse_chain([part]))
    if len(borders) > 1:
        raise FilterSpecError(
            f"filter {text!r}: its presets ask for different borders "
            f"({', '.join(sorted(borders))}); set the border property"
        )
    return Chain(tuple(stages), borders.pop() if borders else None)


@dataclass
class Settings:
    """The element's writable properties, as set (checked by :meth:`chain` and :meth:`check`).

    Attributes:
        filter: the ``filter`` string.
        border: the ``border`` property; ``border_set`` says whether it was set (else a preset's
            border wins over the default).
        backend, kernel, device: as streamconv.Filter takes them.
        ring_depth: frames in flight on the cuda backend.
    """

    filter: str = ""
    border: str = DEFAULT_BORDER
    border_set: bool = False
    backend: str = "auto"
    kernel: str = "auto"
    device: int = 0
    ring_depth: int = DEFAULT_RING_DEPTH

    def set(self, name: str, value: object) -> None:
        """Set one property by its GObject name (``ring-depth``...)."""
        attribute = name.replace("-", "_")
        setattr(self, attribute, value)
        if attribute == "border":
            self.border_set = True

    def chain_key(self) -> tuple[str, str, bool]:
        """What the chain and its border are made from: equal keys make the same chain."""
        return self.filter, self.border, self.border_set

    def get(self, name: str) -> object:
        """One property's value by its GObject name."""
        return getattr(self, name.replace("-", "_"))

    def resolve(self) -> tuple[Chain, str]:
        """The chain and the border mode it runs with (the property's if set, else the presets',
        else the default).

        Raises:
            FilterSpecError, PresetError: as :func:`parse_filter_chain`.
            SettingsError: an unknown border or backend, a ring depth out of range.
        """
        if self.border not in BORDER_MODES:
            raise SettingsError(
                f"unknown border {self.border!r}; known: {', '.join(BORDER_MODES)}"
            )
        if self.backend not in BACKENDS:
            raise SettingsError(f"unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")
        if not 1 <= self.ring_depth <= MAX_RING:
            raise SettingsError(f"ring-depth {self.ring_depth}: from 1 to {MAX_RING}")
        chain = parse_filter_chain(self.filter)
        border = self.border if self.border_set or chain.border is None else chain.border
        return chain, border
