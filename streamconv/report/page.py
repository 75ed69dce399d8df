"""The report's HTML: one section per run (its outcome, its stage table, room for its timeline and
latency histogram), the command and the ``info`` lines, the records as JSON for the script that
draws the charts. Every text from a record is escaped; nothing is fetched from anywhere."""

from __future__ import annotations

import html
import json
import shlex

from .. import __version__
from ..run.stats import STAGES
from .script import SCRIPT, STYLE

EXIT_MEANINGS = {0: "finished", 13: "finished; the input was damaged", 130: "stopped (Ctrl-C)",
                 143: "stopped (SIGTERM)"}

_CHART_KEYS = ("frames", "samples_ms", "stages_ms", "timeline")
"""What the script draws from: the rest of a record is shown as HTML, or not at all."""


def page(records: list[dict], *, command: list[str] | None, info: list[str] | None) -> str:
    """The whole page for ``records`` (each a run's stats JSON object), one section each."""
    sections = "\n".join(_section(number, record) for number, record in enumerate(records))
    shown = [{key: record.get(key) for key in _CHART_KEYS} for record in records]
    data = json.dumps(shown, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    title = "streamconv run report" + (f" ({len(records)} sources)" if len(records) > 1 else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{STYLE}</style></head>
<body><main>
<h1>{html.escape(title)}</h1>
{_command(command)}
{sections}
{_info(info)}
<footer>Written by streamconv {html.escape(__version__)}. Times are per frame, in milliseconds;
the charts show the last frames the record kept.</footer>
</main>
<div id="tooltip" hidden></div>
<script type="application/json" id="runs">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def _section(number: int, record: dict) -> str:
    """One run: its heading, outcome and totals, its stage table, and the charts' places."""
    heading = _heading(number, record)
    return f"""<section class="run" data-run="{number}">
<h2>{html.escape(str(heading))}</h2>
{_outcome(record)}
{_stage_table(record)}
<h3>Every frame, stage by stage</h3>
<p class="note">Each row is one stage: the time each frame spent in it, frame after frame. Red
lines mark frames dropped before the frame they stand at; amber lines, damage found in the
input. Point at the chart to read a frame's times.</p>
<div class="chart timeline"></div>
<h3>Latency: how long frames took from read to written</h3>
<div class="chart histogram"></div>
{_damage(record)}
</section>"""


def _heading(number: int, record: dict) -> str:
    """``Source 1: webcam:1`` (one of several), ``in.mp4 -> out.mp4`` (one run), or ``The run``."""
    source, output = record.get("source"), record.get("output")
    if source is None:
        return "The run"
    if "index" in record:
        return f"Source {record['index']}: {source}"
    return f"{source} \u2192 {output if output is not None else 'no output (frames discarded)'}"


def _outcome(record: dict) -> str:
    """The exit code and what it means, the error, and the run's totals."""
    code = record.get("exit_code")
    error = record.get("error")
    meaning = EXIT_MEANINGS.get(code, "failed") if code is not None else "not recorded"
    verdict = "ok" if code == 0 else "bad"
    said = f"{meaning}: {error}" if error else meaning
    lines = [f'<p class="outcome {verdict}">Exit code {html.escape(str(code))}: '
             + f"{html.escape(said)}</p>"]
    wall, fps = _number(record.get("wall_seconds")), _number(record.get("fps"))
    facts = [f"{record.get('frames', 0)} frames written in {wall} s = {fps} fps",
             f"{record.get('dropped', 0)} dropped",
             f"{record.get('decode_errors', 0)} damaged packet(s) or frame(s)",
             f"backend: {record.get('backend') or 'unknown'}"]
    if record.get("decoder"):
        facts.append(f"decoded by {record['decoder']}")
    if record.get("interrupted"):
        facts.append("interrupted")
    warned = {1: record.get("dropped"), 2: record.get("decode_errors")}  # facts worth a look
    items = "".join(f'<li{" class=warn" if warned.get(n) else ""}>{html.escape(fact)}</li>'
                    for n, fact in enumerate(facts))
    return "\n".join(lines) + f'\n<ul class="facts">{items}</ul>'


def _number(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "?"


def _stage_table(record: dict) -> str:
    """The percentiles of every stage, in milliseconds, as the summary table prints them."""
    stages = record.get("stages_ms") or {}
    if not stages:
        return '<p class="note">No frame was written: no stage was timed.</p>'
    rows = []
    for stage in [s for s in STAGES if s in stages] + sorted(set(stages) - set(STAGES)):
        row = stages[stage]
        cells = "".join(f"<td>{_number(row.get(key))}</td>"
                        for key in ("p50", "p95", "p99", "max", "mean"))
        rows.append(f'<tr><th scope="row">{html.escape(stage)}</th>{cells}</tr>')
    exact = "" if record.get("percentiles_exact", True) else \
        " Percentiles within 0.5% (more frames than the record keeps raw)."
    return (f'<table class="stages"><caption>Time per frame in each stage, ms.{exact}</caption>'
            "<thead><tr><th>stage</th><th>p50</th><th>p95</th><th>p99</th><th>max</th>"
            f"<th>mean</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _damage(record: dict) -> str:
    """What was found wrong with the input, one line per kind (nothing when nothing was)."""
    damage = record.get("damage") or []
    if not damage:
        return ""
    items = "".join(f"<li>{html.escape(str(phrase))}</li>" for phrase in damage)
    return f'<h3>Damage found in the input</h3><ul class="damage">{items}</ul>'


def _command(command: list[str] | None) -> str:
    if not command:
        return ""
    return f'<h2>Command</h2><pre class="command">{html.escape(shlex.join(command))}</pre>'


def _info(info: list[str] | None) -> str:
    if not info:
        return ""
    return ("<h2>Where it ran (streamconv info)</h2>"
            f'<pre class="info">{html.escape(chr(10).join(info))}</pre>')
