"""The tables of filters and presets as Markdown, read from the filter registry and pipelines/."""

from __future__ import annotations

import sys

from cli_reference import escaped


def _registry() -> dict:
    """The filter registry: it lives in the module that defines streamconv.parse_filter."""
    import streamconv

    return sys.modules[streamconv.parse_filter.__module__].REGISTRY


def _parameter(key: str, param) -> str:
    default = "" if param.default in ("", 0, False, None) else f" = {param.default}"
    return f"`{key}`{default}: {escaped(param.help)}"


def filter_table() -> str:
    """Every filter of the registry: its name, what it does and its parameters."""
    lines = ["| filter | what it does | parameters |", "| --- | --- | --- |"]
    for entry in _registry().values():
        parameters = "<br>".join(_parameter(key, param) for key, param in entry.params.items())
        lines.append(f"| `{entry.name}` | {escaped(entry.summary)} | {parameters} |")
    return "\n".join(lines)


def preset_table() -> str:
    """Every preset of pipelines/: its name, what it is, its chain and border."""
    import streamconv

    lines = ["| preset | what it is | chain | border |", "| --- | --- | --- | --- |"]
    for name in streamconv.list_presets():
        preset = streamconv.load_preset(name)
        chain = " → ".join(f"`{stage.describe()}`" for stage in preset.filters)
        lines.append(f"| `{name}` | {escaped(preset.description)} | {chain} | "
                     f"{preset.border or 'the run’s'} |")
    return "\n".join(lines)
