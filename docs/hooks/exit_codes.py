"""The table of exit codes as Markdown, read from streamconv/errors.py."""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import signal
from pathlib import Path

OUTSIDE_ERRORS = [  # the codes the command gives without an exception of errors.py
    (0, "Done: the output is complete (also after q, Esc or closing the window).", ""),
    (1, ("Internal error: an exception streamconv did not raise on purpose (a bug). One line "
         "says so; `-v` shows the traceback."), ""),
    (2, ("Usage error: an option, value or argument the command does not take (argparse's "
         "own code, and streamconv's checks of the options before any work)."), ""),
]


def _first_paragraph(text: str) -> str:
    """A docstring's first paragraph on one line, Sphinx roles (:mod:`x`) as code."""
    return re.sub(r":\w+:`([^`]*)`", r"`\1`", " ".join(text.strip().split("\n\n")[0].split()))


def _constants(path: Path) -> list[tuple[int, str, str]]:
    """(code, docstring, name) of every ``EXIT_* = int`` in errors.py followed by a docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    found = []
    for node, after in itertools.pairwise(body):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.startswith("EXIT_")
                and isinstance(node.value, ast.Constant) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            found.append((node.value.value, _first_paragraph(after.value.value), node.targets[0].id))
    return found


def _builtin_base(cls: type) -> str:
    """The built-in exception a caller may catch ``cls`` as (ValueError, OSError...)."""
    for base in cls.__mro__[1:]:
        if base.__module__ == "builtins" and base not in (Exception, BaseException, object):
            return base.__name__
    return ""


def _exceptions(errors) -> list[tuple[int, str, str]]:
    """(code, docstring, "Name (a Builtin)") of each exception class of errors.py."""
    rows = []
    for name, cls in vars(errors).items():
        if not (inspect.isclass(cls) and cls.__module__ == errors.__name__
                and issubclass(cls, BaseException)):
            continue
        base = _builtin_base(cls)
        raised = f"`{name}`" + (f" (`{base}`)" if base else "")
        if issubclass(cls, errors.Interrupted):  # 128 + the signal's number
            for signum in (signal.SIGINT, signal.SIGTERM):
                rows.append((128 + signum, f"Ended by {signum.name}. "
                             + _first_paragraph(inspect.getdoc(cls) or ""), raised))
        else:
            rows.append((cls.exit_code, _first_paragraph(inspect.getdoc(cls) or ""), raised))
    return rows


def exit_code_table() -> str:
    """Every exit code of the command, in order: what it means and what raises it in Python."""
    from streamconv import errors

    rows = list(OUTSIDE_ERRORS) + _exceptions(errors)
    codes = {code for code, _, _ in rows}
    rows += [(code, text, f"`{name}`") for code, text, name in _constants(Path(errors.__file__))
             if code not in codes]
    rows.sort(key=lambda row: row[0])  # stable: the module's order within a code
    lines = ["| exit | meaning | raised as |", "| --- | --- | --- |"]
    lines += [f"| {code} | {text} | {raised} |" for code, text, raised in rows]
    return "\n".join(lines)
