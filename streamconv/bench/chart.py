"""The ``streamconv bench --chart`` figure: kernel ms against K, log scale, one panel per frame
size.

Needs matplotlib (``pip install 'streamconv[plot]'``).
"""

from __future__ import annotations

import io
from pathlib import Path

from ..errors import BackendUnavailableError
from ..files.publish import write_atomically


def check_matplotlib() -> None:
    """Raise a clear error, naming the extra, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BackendUnavailableError("--chart needs matplotlib: pip install "
                                      "'streamconv[plot]'") from None


def write_chart(result: dict, path: str | Path, *, overwrite: bool = False) -> None:
    """Draw ``result`` (from :func:`streamconv.bench.kernels.run_bench`) as a PNG at ``path``,
    published whole (:func:`streamconv.files.publish.write_atomically`: an existing file only with
    ``overwrite``).

    Raises:
        OutputError: ``path`` exists (without ``overwrite``) or cannot be written.
    """
    check_matplotlib()
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    rows = result["rows"]
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    figure, axes = plt.subplots(1, len(sizes), figsize=(6.5 * len(sizes), 5), squeeze=False,
                                sharey=True)
    for axis, size in zip(axes[0], sizes):
        series = dict.fromkeys((r["variant"], r["taps"]) for r in rows if r["size"] == size)
        colours = plt.cm.tab20.colors  # more distinct colours than series, so none repeats
        for number, (name, taps) in enumerate(series):
            points = sorted((r["k"], r["ms"]) for r in rows
                            if (r["size"], r["variant"], r["taps"]) == (size, name, taps))
            host = name.startswith("cv2.")
            axis.plot([k for k, _ in points], [ms for _, ms in points], marker="o", markersize=3,
                      color=colours[(2 * number) % 20 + (number * 2 // 20) % 2],
                      linestyle="--" if host else "-", label=f"{name} ({taps})")
        axis.set_yscale("log")
        axis.set_xlabel("K (taps per side)")
        axis.set_title(
            f"{size} RGB {'uint16' if result['environment'].get('depth') == 16 else 'uint8'}")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms per frame")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    env = result["environment"]
    figure.suptitle(f"streamconv kernels on {env['gpu']} (border {env['border']})")
    figure.tight_layout()
    png = io.BytesIO()  # savefig would write into the file in place, through a link too
    figure.savefig(png, format="png", dpi=120)
    plt.close(figure)
    write_atomically(path, png.getvalue(), overwrite=overwrite, what="--chart")
