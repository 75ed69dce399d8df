"""Pipeline presets: TOML files in pipelines/ (shipped with the package) or given by path.

A preset names a border mode (optional) and a list of filter stages; every stage is
built through the same registry as ``--filter``::

    description = "Sobel edge magnitude after a light blur"
    border = "reflect101"

    [[filter]]
    name = "gaussian"
    sigma = 0.8

    [[filter]]
    name = "edge"

A relative ``file = "..."`` (``custom`` taps, ``bank`` layer weights) is read from the preset's own
folder, so a preset and its files can move together. Errors name files, never quote their
contents beyond a short token.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..frames.borders import BORDER_MODES
from ..errors import FilterSpecError, PresetError
from .filters import REGISTRY, FilterStage, build_filter
from ..files.resources import data_dir, is_file, read_limited
from .suggest import did_you_mean
from ..files.tapfiles import MAX_QUOTED_CHARS, brief_reason, decode_text, quote_text, show_value

MAX_PRESET_BYTES = 64 * 1024
"""A preset larger than this is refused: at most one byte more is ever read."""

# tomllib's (and tomli's) messages that quote keys of the document; the key is cut like any token.
_TOML_KEY_MESSAGE = re.compile(
    r"^(Cannot declare|Cannot mutate immutable namespace|Cannot redefine namespace"
                               r"|Duplicate inline table key) (.+?)( twice)?$")
# Their other messages are at most 47 characters: a longer one is cut, whatever it quotes.
_MAX_TOML_REASON = 64
_TOML_POSITION = re.compile(r" \(at (?:line \d+, column \d+|end of document)\)$")
_TOP_KEYS = {"description", "border", "filter"}


@dataclass(frozen=True)
class Preset:
    """A loaded preset: its name, description, optional border mode and filter stages."""

    name: str
    description: str
    border: str | None
    filters: tuple[FilterStage, ...]


def preset_dir() -> Path:
    """The folder of the shipped presets."""
    return data_dir("pipelines")


def list_presets() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in preset_dir().glob("*.toml"))


def _locate(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    if text.endswith(".toml") or "/" in text or "\\" in text:
        path = Path(text)
        if not is_file(path):
            raise PresetError(f"preset file not found: {text}")
        return path
    path = preset_dir() / f"{text}.toml"
    if not is_file(path):
        known = list_presets()
        raise PresetError(f"unknown preset {text!r}{did_you_mean(text, known)}; "
                          f"known presets: {', '.join(known)}")
    return path


def _toml_reason(exc: ValueError) -> str:
    """tomllib's message with a quoted key cut to MAX_QUOTED_CHARS characters, the whole cut to
    _MAX_TOML_REASON characters, and its "(at line L, column C)" kept."""
    if not isinstance(exc, tomllib.TOMLDecodeError):
        # The plain ValueError of int() on an integer literal over 4300 digits, or the like.
        return brief_reason(exc)
    text = str(exc).split("\n", 1)[0]
    match = _TOML_POSITION.search(text)
    where = match.group(0) if match else ""
    text = text[:match.start()] if match else text
    key = _TOML_KEY_MESSAGE.match(text)
    if key and len(key.group(2)) > MAX_QUOTED_CHARS:
        text = f"{key.group(1)} {key.group(2)[:MAX_QUOTED_CHARS]}...{key.group(3) or ''}"
    if len(text) > _MAX_TOML_REASON:
        text = text[:_MAX_TOML_REASON] + "..."
    return text + where


def _read_preset(path: Path) -> dict:
    """Read and parse the TOML of a preset, at most MAX_PRESET_BYTES of it.

    Raises:
        PresetError: unreadable, too large, not UTF-8 or not TOML; naming the file and a short
            reason.
    """
    data = read_limited(path, MAX_PRESET_BYTES, what=f"preset {path}", error=PresetError)
    text = decode_text(data, f"preset {path}", PresetError)
    try:
        return tomllib.loads(text)
    except ValueError as exc:
        # TOMLDecodeError, but also the plain ValueError of tomllib's int() on an integer
        # literal over 4300 digits.
        raise PresetError(f"preset {path}: not valid TOML ({_toml_reason(exc)})") from None
    except RecursionError:
        # tomllib recurses once per level of nested arrays or inline tables.
        raise PresetError(f"preset {path}: not valid TOML (arrays or tables nested too "
                          "deeply)") from None


def _resolve_files(name: str, params: dict, folder: Path) -> None:
    """Make a relative ``file`` parameter of filter ``name`` relative to ``folder`` (the preset's
    own), in place; absolute paths and values of other types (refused later) stay as they are."""
    entry = REGISTRY.get(name)
    value = params.get("file")
    if entry is None or "file" not in entry.params or not isinstance(value, str) or not value:
        return
    if not Path(value).is_absolute():
        params["file"] = str(folder / value)


def load_preset(name_or_path: str | Path) -> Preset:
    """Load a shipped preset by name (``edge``) or a TOML file by path, and validate it fully.

    A relative ``file = "..."`` in a stage is read from the preset's folder; a byte-order mark at
    the start of the file is allowed.

    Raises:
        PresetError: missing, unreadable or oversized file, bad TOML, unknown keys, wrong types,
            or a stage the filter registry rejects (the message names the stage). Messages name
            files but quote at most a short token of any file's contents.

    Examples:
        >>> [stage.name for stage in load_preset("edge").filters]
        ['gaussian', 'edge']
    """
    path = _locate(name_or_path)
    data = _read_preset(path)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise PresetError(f"preset {path}: unknown key {quote_text(unknown[0])} "
                          f"(keys: {', '.join(sorted(_TOP_KEYS))})")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise PresetError(f"preset {path}: description must be a string")
    border = data.get("border")
    if border is not None:
        if not isinstance(border, str):
            raise PresetError(f"preset {path}: border must be a string, got {show_value(border)}")
        if border not in BORDER_MODES:
            raise PresetError(f"preset {path}: unknown border mode {quote_text(border)}; "
                              f"known: {', '.join(BORDER_MODES)}")
    stages = data.get("filter")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, dict) for s in stages):
        raise PresetError(f"preset {path}: needs one or more [[filter]] tables")
    filters = []
    for number, stage in enumerate(stages, start=1):
        params = dict(stage)
        name = params.pop("name", None)
        if not isinstance(name, str):
            raise PresetError(f"preset {path}: filter {number} needs name = \"...\"")
        _resolve_files(name, params, Path(os.path.abspath(path)).parent)
        try:
            filters.append(build_filter(name, params))
        except FilterSpecError as exc:
            raise PresetError(f"preset {path}: filter {number}: {exc}") from None
    return Preset(name=path.stem, description=description, border=border, filters=tuple(filters))
