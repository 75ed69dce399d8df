"""What the command prints about what was typed: no value is echoed whole.

An option value, a SOURCE or a file name may be of any length (100,000 characters, by mistake
or not), and a message quoting it whole is a line of 100 KB or more. Every message of the
command passes through :func:`brief`: error lines (:func:`say_error`), argparse's usage errors
(the parser's ``error``, :mod:`streamconv.cli.parser`), log records (:class:`BriefFormatter`),
the lines of several sources and of a batch's inputs.
"""

from __future__ import annotations

import logging
import re
import sys

LONG_TOKEN = 300
"""Characters without a blank beyond which a run is cut (paths of ordinary depth stay whole)."""
QUOTED = 60
"""Characters of a cut run that are kept."""
LONG_LINE = 2000
"""Characters of a line beyond which it is cut (a long value with blanks in it)."""

_TOKEN = re.compile(rf"\S{{{LONG_TOKEN + 1},}}")


def brief(text: str) -> str:
    """``text`` with each run of over LONG_TOKEN non-blank characters cut to its first QUOTED,
    ``...`` and its length, and each line to LONG_LINE characters."""
    lines = []
    for line in text.split("\n"):
        line = _TOKEN.sub(lambda run: f"{run[0][:QUOTED]}... ({len(run[0])} characters)", line)
        if len(line) > LONG_LINE:
            line = f"{line[:LONG_LINE]}... ({len(line) - LONG_LINE} characters more)"
        lines.append(line)
    return "\n".join(lines)


def say_error(message: object) -> None:
    """Print ``streamconv: error: MESSAGE`` on stderr, :func:`brief`."""
    print(brief(f"streamconv: error: {message}"), file=sys.stderr)


class BriefFormatter(logging.Formatter):
    """A log formatter whose records are :func:`brief`."""

    def format(self, record: logging.LogRecord) -> str:
        return brief(super().format(record))
