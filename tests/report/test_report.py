"""--report and ``streamconv report``: the page of a real run, opened in a real headless Chromium,
shows one timeline point per frame and stage, one histogram count per frame, a mark at each drop
and each damage the run recorded; it is written as every output is (never an input, never over
a file without --overwrite, whole or not at all), and made again alike from --stats-json."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import streamconv
from streamconv.errors import InputError

from helpers.browser import Elements, needs_chromium, rendered_dom
from helpers.cli import assert_error, assert_ok
from helpers.clips import write_clip
from streamconv.io.sources.pattern import parse_test_spec
from streamconv.io.sinks.sink import CallbackSink
from streamconv.report import load_stats, render_report
from streamconv.run.stats import RunStats


def shown(page: Path) -> tuple[Elements, str]:
    """The elements of ``page`` once Chromium ran its script (which must have drawn every run),
    and that DOM's text."""
    dom = rendered_dom(page)
    elements = Elements(dom)
    assert elements.having("body", data_drawn=str(len(elements.having("section")))), \
        "the script did not finish drawing"
    return elements, dom


def assert_one_point_per_frame(elements: Elements, record: dict) -> None:
    """Every stage's line has a point for each frame the record kept; the histogram counts each
    frame once."""
    lines = elements.having("polyline", class_="series")
    assert {line["data-stage"] for line in lines} == set(record["samples_ms"])
    for line in lines:
        points = re.findall(r"[-\d.]+,[-\d.]+", line["points"])
        kept = record["samples_ms"][line["data-stage"]]
        assert len(points) == int(line["data-points"]) == len(kept)
    bars = elements.having("rect", class_="bar")
    assert sum(int(bar["data-count"]) for bar in bars) == len(record["samples_ms"]["latency"])


def marks_recorded(record: dict, kind: int) -> list[tuple[int, int]]:
    """(frame, how many) where the record's count ``kind`` (1 dropped, 2 damage) went up."""
    found, before = [], 0
    for event in record["timeline"]["events"]:
        if event[kind] > before:
            found.append((event[0], event[kind] - before))
        before = event[kind]
    return found


@needs_chromium
def test_a_damaged_input_is_marked_where_its_damage_was_found(cli, tmp_path):
    clip = write_clip(tmp_path / "clip.ts", frames=48, options={"preset": "ultrafast", "g": "12"})
    data = clip.read_bytes()
    start = int(len(data) * 0.3)
    damaged = tmp_path / "damaged.ts"
    damaged.write_bytes(data[:start] + bytes(3000) + data[start + 3000:])  # zeroed bytes
    page, stats = tmp_path / "run.html", tmp_path / "stats.json"
    result = cli("run", str(damaged), "--filter", "edge", "--backend", "cpu", "--no-progress",
                 "-q", "--report", str(page), "--stats-json", str(stats))
    assert result.returncode == 13, result.stderr
    record = json.loads(stats.read_text())
    elements, _ = shown(page)
    assert_one_point_per_frame(elements, record)
    assert len(record["samples_ms"]["latency"]) == record["frames"] > 30
    damage = marks_recorded(record, 2)
    assert damage and sum(count for _, count in damage) == record["decode_errors"]
    drawn = elements.having("line", class_="damage")
    assert [(int(m["data-frame"]), int(m["data-count"])) for m in drawn] == damage
    assert not elements.having("line", class_="drop")
    assert all(phrase in elements.items for phrase in record["damage"])  # the list, word for word
    assert "streamconv run " + str(damaged) in page.read_text()  # the command
    assert "backends:" in page.read_text()  # streamconv info's lines
    # The same page again from the JSON the run wrote beside it.
    again = tmp_path / "again.html"
    assert_ok(cli("report", str(stats), "-o", str(again)))
    assert again.read_text() == page.read_text()


@needs_chromium
def test_frames_a_live_run_dropped_are_marked_before_the_frame_they_preceded(tmp_path):
    """A live pattern at 200 fps into a sink that takes 20 ms a frame: its newest-frame policy
    drops frames for real."""
    source = parse_test_spec("test:64x48@200,live")

    def slow(frame, meta):
        time.sleep(0.02)

    stats = streamconv.Pipeline(source, ["identity"], CallbackSink(slow), backend="cpu",
                                max_frames=12, progress=False).run()
    record = {"exit_code": 0, "error": None, **stats.to_dict()}
    drops = marks_recorded(record, 1)
    assert stats.dropped > 0 and drops
    assert sum(count for _, count in drops) <= stats.dropped  # counted when each frame was read
    page = tmp_path / "live.html"
    page.write_text(render_report(record))
    elements, _ = shown(page)
    assert_one_point_per_frame(elements, record)
    drawn = elements.having("line", class_="drop")
    assert [(int(m["data-frame"]), int(m["data-count"])) for m in drawn] == drops


@needs_chromium
def test_several_sources_make_one_section_each(cli, tmp_path):
    page, stats = tmp_path / "two.html", tmp_path / "two.json"
    assert_ok(cli("run", "test:64x48@30,frames=9,live", "test:48x32@30,frames=6,live",
                  "--filter", "box", "--backend", "cpu", "--no-progress", "-q",
                  "--report", str(page), "--stats-json", str(stats)))
    records = json.loads(stats.read_text())
    elements, dom = shown(page)
    assert len(elements.having("section")) == 2
    for record, section in zip(records, dom.split("<section")[1:]):
        assert_one_point_per_frame(Elements(section), record)
    # live sources drop what a loaded machine misses: each frame is shown or counted dropped
    assert [r["frames"] + r["dropped"] for r in records] == [9, 6]


def test_the_page_fetches_nothing_and_escapes_what_the_record_says(tmp_path):
    stats = RunStats(backend="cpu <b>")
    stats.record({"read": 0.001, "latency": 0.002}, at=0.0)
    record = {"exit_code": 8, "error": "</script><img src=x onerror=alert(1)>", "source": "a&b",
              **stats.to_dict(), "command": ["streamconv", "run", "<x>"], "info": ["<y>"]}
    text = render_report(record)
    assert "<img" not in text and text.count("</script>") == 2  # the page's own two
    assert "&lt;img src=x" in text and "&lt;x&gt;" in text and "a&amp;b" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing from the network
    assert "<link" not in text and "@import" not in text


@pytest.mark.parametrize("argv, code, fragment", [
    (["--report", "{stats}", "--stats-json", "{stats}"], 6, "the same file"),
    (["--report", "{source}"], 6, "the input"),
    (["--report", "{output}"], 6, "the output"),
    (["--report", "{existing}"], 6, "exists"),
    (["--report", "-"], 2, "--report names a file, not standard output"),
    (["--report", ""], 2, "--report is empty"),
])
def test_the_page_is_written_as_every_output_is(cli, tmp_path, argv, code, fragment):
    source = write_clip(tmp_path / "in.mp4", frames=3)
    existing = tmp_path / "old.html"
    existing.write_text("kept")
    output = tmp_path / "out.mp4"
    names = {"stats": str(tmp_path / "s.json"), "source": str(source), "existing": str(existing),
             "output": str(output)}
    result = cli("run", str(source), "-o", str(output), "--backend", "cpu", "--no-progress",
                 *[arg.format(**names) for arg in argv])
    if code == 2:  # a usage error, said as argparse says them
        assert result.returncode == 2 and f"streamconv run: error: {fragment}" in result.stderr
    else:
        assert_error(result, code, fragment)
    assert not output.exists() and existing.read_text() == "kept"  # refused before any work
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "old.html"]


def test_report_reads_only_stats_files_and_writes_beside_them(cli, tmp_path):
    stats = tmp_path / "run.json"
    assert_ok(cli("run", "test:64x48,frames=4", "--backend", "cpu", "--no-progress", "-q",
                  "--stats-json", str(stats)))
    assert_ok(cli("report", str(stats)))  # beside it: run.html
    assert "streamconv run report" in (tmp_path / "run.html").read_text()
    assert_error(cli("report", str(stats)), 6, "exists")  # not again without --overwrite
    assert_ok(cli("report", str(stats), "--overwrite"))
    assert_error(cli("report", str(stats), "-o", str(stats), "-y"), 6, "the same file")
    assert json.loads(stats.read_text())["frames"] == 4  # the stats file untouched
    (tmp_path / "bad.json").write_text("{")
    assert_error(cli("report", str(tmp_path / "bad.json"), "-o", str(tmp_path / "x.html")), 4,
                 f"stats file {tmp_path / 'bad.json'}: not JSON")
    assert not (tmp_path / "x.html").exists()
    assert load_stats(stats)["frames"] == 4


@pytest.mark.parametrize("text, fragment", [
    ('{"frames": 1, "stages_ms": {}, "fps": NaN}', "not JSON (NaN is no JSON number)"),
    ("[1, 2]", "not what --stats-json writes"),
    ("[]", "no run in it"),
    ('{"frames": 2, "samples_ms": {"read": [1, "x"]}}', "samples_ms is not lists of numbers"),
    ('{"frames": 2, "timeline": {"events": [[0, 1]]}}', "its timeline is not"),
    ('{"frames": 2, "timeline": {"start_s": 3}}', "its timeline is not"),
])
def test_files_that_are_no_stats_record_are_refused(tmp_path, text, fragment):
    path = tmp_path / "stats.json"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(fragment)):
        load_stats(path)
