"""One close match for a mistyped name (a filter, a preset, an option): "did you mean ...?"."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

LONGEST_GUESSED = 64
"""Names longer than this get no guess: nobody mistypes one, and difflib's time grows with it."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one choice nearest ``word`` by difflib's ratio (at least 0.6, compared in lower
    case), or None; ``word`` itself is no guess."""
    if not word or len(word) > LONGEST_GUESSED:
        return None
    by_lower = {choice.lower(): choice for choice in choices if choice != word}
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'gaussian'?)`` for the closest choice, or an empty string."""
    found = closest(word, choices)
    return f" (did you mean {found!r}?)" if found is not None else ""
