"""Reading ``--progress`` blocks."""

from __future__ import annotations




def blocks(text: str) -> list[dict[str, str]]:
    """The blocks of a progress text, each a dict; every line must be key=value."""
    found, block = [], {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        assert _ == "=", line
        block[key] = value
        if key == "progress":
            found.append(block)
            block = {}
    assert block == {}, "a block without its progress= line"
    return found
