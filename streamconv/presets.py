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
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from .borders import check_border
from .errors import FilterSpecError, PresetError
from .filters import FilterStage, build_filter, show_value
from .resources import data_dir, is_file

MAX_PRESET_BYTES = 64 * 1024
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
        raise PresetError(f"unknown preset {text!r}; known presets: {', '.join(list_presets())}")
    return path


def load_preset(name_or_path: str | Path) -> Preset:
    """Load a shipped preset by name (``edge``) or a TOML file by path, and validate it fully.

    Raises:
        PresetError: missing file, bad TOML, unknown keys, wrong types, or a stage the
            filter registry rejects (the message names the stage).

    Example:
        >>> [stage.name for stage in load_preset("edge").filters]
        ['gaussian', 'edge']
    """
    path = _locate(name_or_path)
    if path.stat().st_size > MAX_PRESET_BYTES:
        raise PresetError(f"preset {path} is too large ({path.stat().st_size} bytes)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PresetError(f"preset {path}: cannot read it ({exc})") from None
    except ValueError as exc:
        # TOMLDecodeError and UnicodeDecodeError, but also the plain ValueError of tomllib's
        # int() on an integer literal over 4300 digits.
        raise PresetError(f"preset {path}: not valid TOML ({exc})") from None
    except RecursionError:
        # tomllib recurses once per level of nested arrays or inline tables.
        raise PresetError(f"preset {path}: not valid TOML (arrays or tables nested too deeply)") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise PresetError(f"preset {path}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_TOP_KEYS))})")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise PresetError(f"preset {path}: description must be a string")
    border = data.get("border")
    if border is not None:
        if not isinstance(border, str):
            raise PresetError(f"preset {path}: border must be a string, got {show_value(border)}")
        try:
            check_border(border)
        except FilterSpecError as exc:
            raise PresetError(f"preset {path}: {exc}") from None
    stages = data.get("filter")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, dict) for s in stages):
        raise PresetError(f"preset {path}: needs one or more [[filter]] tables")
    filters = []
    for number, stage in enumerate(stages, start=1):
        params = dict(stage)
        name = params.pop("name", None)
        if not isinstance(name, str):
            raise PresetError(f"preset {path}: filter {number} needs name = \"...\"")
        try:
            filters.append(build_filter(name, params))
        except FilterSpecError as exc:
            raise PresetError(f"preset {path}: filter {number}: {exc}") from None
    return Preset(name=path.stem, description=description, border=border, filters=tuple(filters))
