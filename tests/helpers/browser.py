"""A page opened in a real headless Chromium, and what its DOM holds after its scripts ran."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))),
                None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (.ci/run installs "
                                                             "Debian's chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--hide-scrollbars"]


def chromium(page: Path, *action: str) -> subprocess.CompletedProcess:
    """Run Chromium on ``page`` with a fresh profile and ``action`` (--dump-dom, --screenshot=)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *action,
                               page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=120, check=False)


def rendered_dom(page: Path) -> str:
    """The page's DOM, serialized after its scripts ran."""
    result = chromium(page, "--dump-dom")
    assert result.returncode == 0 and result.stdout.strip(), result.stderr[-2000:]
    return result.stdout


class Elements(HTMLParser):
    """Every element's tag and attributes, in document order; the text of each <li>."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []
        self.items: list[str] = []
        self._in_item = False
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, {key: value or "" for key, value in attrs}))
        self._in_item = tag == "li"
        if self._in_item:
            self.items.append("")

    def handle_endtag(self, tag):
        self._in_item = self._in_item and tag != "li"

    def handle_data(self, data):
        if self._in_item:
            self.items[-1] += data

    def having(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        """The attributes of every ``tag`` element whose attributes include ``attrs``
        (``class_`` for class)."""
        wanted = {key.rstrip("_").replace("_", "-"): value for key, value in attrs.items()}
        return [found for name, found in self.found
                if name == tag and all(found.get(k) == v for k, v in wanted.items())]
