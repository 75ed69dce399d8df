"""``run --report PATH.html`` and ``streamconv report STATS.json``: the page of a run
(streamconv.report), and what a run's record says of where it ran (the command, ``info``)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

from ..io.ffmpeg.formats import is_pipe
from ..files.publish import check_output_path, without_file_scheme
from ..report import load_stats, write_report
from .info import cmd_info

_USER_INFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)


def add_report_option(group) -> None:
    """run's --report, in its reporting group."""
    group.add_argument("--report", metavar="PATH.html",
                       help="write a picture of the run: one HTML page (no network needed) with "
                            "the stage table, every frame's time in each stage with drops and "
                            "damage marked, a latency histogram, the command and `streamconv "
                            "info`'s lines")


def add_report_parser(commands) -> None:
    """Add ``streamconv report STATS [-o PATH] [-y]``."""
    report = commands.add_parser(
        "report", help="the HTML page of a run from its --stats-json file",
        description="Make the page --report writes from a file --stats-json wrote (of one run, "
                    "or of several sources).")
    report.add_argument("stats", metavar="STATS.json", help="a file --stats-json wrote")
    report.add_argument("-o", "--output", metavar="PATH.html",
                        help="where the page goes (default: STATS with .html for .json)")
    report.add_argument("--overwrite", "-y", action="store_true",
                        help="replace the page if it exists")


def cmd_report(args: argparse.Namespace) -> int:
    """``streamconv report``: read the stats file, write its page (whole, or nothing)."""
    stats = without_file_scheme(args.stats)
    output = without_file_scheme(args.output) if args.output else _page_beside(stats)
    check_output_path(output, overwrite=args.overwrite, what="the report", protect=(stats,))
    write_report(output, load_stats(stats), overwrite=args.overwrite, protect=(stats,),
                 what="the report")
    return 0


def _page_beside(stats: str) -> str:
    """stats.json -> stats.html (another name: .html added)."""
    path = Path(stats)
    return str(path.with_suffix(".html") if path.suffix.lower() == ".json" else
               path.with_name(path.name + ".html"))


def check_report_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--report names a file (not standard output, not empty); a ``file:`` URL is its path."""
    if args.report is None:
        return
    if not args.report.strip():
        parser.error("--report is empty")
    args.report = without_file_scheme(args.report)
    if is_pipe(args.report):  # else a file named "-"
        parser.error("--report names a file, not standard output; a file named - is ./-")


def run_context(args: argparse.Namespace) -> dict:
    """What a run's record (--stats-json, --report) says of where it ran: the command, with
    any password in a URL hidden, and ``streamconv info``'s lines."""
    words = ["streamconv", *getattr(args, "command_line", [])]
    lines = io.StringIO()
    with contextlib.redirect_stdout(lines):
        cmd_info(args)
    return {"command": [_USER_INFO.sub(r"\1***@", word) for word in words],
            "info": lines.getvalue().splitlines()}


def write_run_report(args: argparse.Namespace, record: dict | list[dict], protect) -> None:
    """Write --report's page of ``record`` (one run's, or several sources' list), whole or not
    at all; never over one of ``protect``, nor over a file without --overwrite."""
    write_report(args.report, record, overwrite=args.overwrite, protect=protect)
