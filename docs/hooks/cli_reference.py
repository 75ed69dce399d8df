"""The command-line reference as Markdown, read from the command's own argparse parser."""

from __future__ import annotations

import argparse
import html
import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def escaped(text: str) -> str:
    """Help text as Markdown that shows it literally: no HTML, emphasis, links or table cells."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(" ".join(text.split()), quote=False))


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order they were added."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]


def _option_rows(parser: argparse.ArgumentParser, group: argparse._ArgumentGroup) -> list[str]:
    """One table row per documented argument of ``group``: how it is written, what it does."""
    formatter = parser._get_formatter()  # argparse's own rendering of "-o OUTPUT, --output OUTPUT"
    rows = []
    for action in group._group_actions:
        if action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        meaning = formatter._expand_help(action) if action.help else ""
        rows.append(f"| `{invocation.replace('|', '/')}` | {escaped(meaning)} |")
    return rows


def _command_section(name: str, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    """The Markdown of one subcommand: its usage, description, argument groups and epilog."""
    lines = [f"## streamconv {name}", ""]
    if summary:
        lines += [escaped(summary[0].upper() + summary[1:]) + ".", ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [escaped(parser.description), ""]
    for group in parser._action_groups:
        rows = _option_rows(parser, group)
        if not rows:
            continue
        lines += [f"### {name}: {group.title}", ""]
        if group.description:
            lines += [escaped(group.description), ""]
        lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    return lines


def cli_reference() -> str:
    """Every subcommand of ``streamconv``, as the parser defines it, as Markdown sections."""
    from streamconv.cli.parser import build_parser

    parser = build_parser()
    lines = ["| command | what it does |", "| --- | --- |"]
    commands = _commands(parser)
    lines += [f"| [`{name}`](#streamconv-{name}) | {escaped(summary)} |"
              for name, summary, _ in commands]
    lines.append("")
    for name, summary, sub in commands:
        lines += _command_section(name, summary, sub)
    return "\n".join(lines)
