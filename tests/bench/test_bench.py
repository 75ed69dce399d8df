"""``streamconv bench`` without a GPU: option checking, the clear error, and the table and chart
rendering of a result (the GPU run itself is exercised on the GPU machine)."""

from __future__ import annotations

import cv2
import pytest

from streamconv.bench import kernels as bench, chart as benchplot
from streamconv.backends import cuda_status
from streamconv.errors import OutputError

NO_GPU = not cuda_status(0)[0]


def result_with(rows) -> dict:
    environment = {"gpu": "test GPU", "compute_capability": "9.0", "driver_cuda": "13.0",
                   "border": "reflect101", "copy_GBps": 3000.0, "fp32_fma_per_s": 3.3e13}
    return {"environment": environment, "rows": rows}


def row(size, k, variant, taps, ms, lsb=0):
    gbps = 2 * 24.9e6 / (ms / 1e3) / 1e9
    record = bench.BenchRow(size=size, k=k, variant=variant, taps=taps, ms=ms, gbps=gbps,
                            copy_fraction=gbps / 3000, fma_fraction=0.1 * k, max_lsb=lsb,
                            registers=40, chosen=variant)
    return {**bench.asdict(record), "limiter": record.limiter}


@pytest.mark.parametrize("argument, message", [
    ("--ks=4", "odd integers 1..31"),
    ("--ks=33", "odd integers 1..31"),
    ("--sizes=720p", "unknown size '720p'; known: 1080p, 4k"),
    ("--kernels=fastest", "unknown kernel 'fastest'"),
    ("--border=wrap", "invalid choice"),
    ("--depth=10", "invalid choice"),
])
def test_bad_options_are_usage_errors(cli, argument, message):
    result = cli("bench", argument)
    assert result.returncode == 2
    assert message in result.stderr


def test_16_bit_frames_time_only_the_kernels_that_take_them(cli):
    assert bench.kernels_for_depth(["auto", "naive", "register-blocked", "separable"], 16) == [
        "auto", "register-blocked"]
    assert bench.kernels_for_depth(["naive"], 8) == ["naive"]
    result = cli("bench", "--depth", "16", "--kernels", "naive,separable")
    assert result.returncode == 3
    assert "none of naive, separable takes 16-bit frames" in result.stderr


def test_parsers_accept_what_the_help_shows():
    assert bench.parse_sizes("1080p, 4K") == ["1080p", "4k"]
    assert bench.parse_ks("3,5,31") == [3, 5, 31]
    assert bench.parse_kernels("auto,naive") == ["auto", "naive"]
    assert "separable" in bench.parse_kernels("all")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a usable GPU")
def test_without_a_gpu_it_says_why(cli, tmp_path):
    result = cli("bench", "--json", str(tmp_path / "b.json"))
    assert result.returncode == 7
    assert "cuda backend unavailable" in result.stderr
    assert not (tmp_path / "b.json").exists()


def test_report_paths_are_checked_first(cli, tmp_path):
    result = cli("bench", "--json", str(tmp_path / "missing" / "b.json"))
    assert result.returncode == 6
    assert "--json folder does not exist" in result.stderr


def test_table_lists_every_variant_and_k():
    rows = [row("4k", k, v, "random", 0.01 * k) for k in (3, 5)
            for v in ("register-blocked", "naive")]
    rows.append(row("4k", 5, "separable", "gaussian", 0.02))
    rows.append({**row("4k", 5, "cv2.filter2D", "random", 9.0), "max_lsb": None})
    text = bench.format_table(result_with(rows))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("4k RGB"))
    assert "K=3" in header and "K=5" in header
    separable = next(line for line in lines if line.startswith("separable (gaussian)"))
    assert separable.split()[-2:] == ["-", "0.0200"]  # no K=3 figure, then K=5
    assert sum("cv2.filter2D" in line for line in lines) == 1  # host rows only in the ms table


def test_failures_are_reported():
    result = result_with([row("4k", 3, "naive", "random", 0.1, lsb=3)])
    result["failed"] = "naive 4k K=3: 3 LSB"
    with pytest.raises(bench.StreamError, match="naive 4k K=3: 3 LSB"):
        bench.report_failures(result)


def test_chart_is_a_png_with_a_panel_per_size(tmp_path):
    rows = [row(size, k, v, "random", 0.01 * k * (1 + i)) for size in ("1080p", "4k")
            for k in (3, 5, 31) for i, v in enumerate(("register-blocked", "naive"))]
    path = tmp_path / "chart.png"
    benchplot.write_chart(result_with(rows), path)
    image = cv2.imread(str(path))
    assert image is not None and image.shape[1] > image.shape[0] > 300


def test_a_chart_never_replaces_a_file_or_writes_through_a_link(tmp_path):
    """The chart is published whole like any output: an existing file (one that appeared while
    the bench ran, after its first check) is kept without --overwrite, and a link there is
    replaced with --overwrite, never written through."""
    result = result_with([row("4k", k, "naive", "random", 0.01 * k) for k in (3, 5)])
    existing = tmp_path / "chart.png"
    existing.write_bytes(b"someone's chart")
    with pytest.raises(OutputError, match="exists"):
        benchplot.write_chart(result, existing)
    assert existing.read_bytes() == b"someone's chart"
    victim, link = tmp_path / "victim.txt", tmp_path / "link.png"
    victim.write_bytes(b"not a chart")
    link.symlink_to(victim)
    benchplot.write_chart(result, link, overwrite=True)
    assert victim.read_bytes() == b"not a chart" and not link.is_symlink()
    assert cv2.imread(str(link)) is not None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
