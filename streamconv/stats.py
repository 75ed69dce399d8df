"""Per-frame, per-stage timings: percentiles, a summary table and JSON.

Stage names are the same in stats, logs and JSON:
``read`` (decode/capture and conversion into the slot), ``upload``, ``kernel``,
``download`` (GPU work, timed with CUDA events; the CPU backend reports its work as
``kernel``), ``write`` (encode/display) and ``latency`` (from the start of ``read``
to the end of ``write``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

STAGES = ("read", "upload", "kernel", "download", "write", "latency")
PERCENTILES = (50, 95, 99)


@dataclass
class RunStats:
    """Timings of one pipeline run.

    Attributes:
        backend: the backend's one-line description.
        frames: frames written to the sink.
        dropped: frames a live source dropped because the pipeline was behind.
        wall_seconds: from the first read to the last write.
        samples: stage name -> list of per-frame seconds.
        interrupted: True if the run was stopped (Ctrl-C, SIGTERM) before the source ended.
        resizes: times the frame size changed mid-stream (the slots were re-allocated).
        decode_errors: damaged packets or frames of the input that were skipped or concealed.
        damage: what was found wrong with the input, one phrase per kind (empty: nothing).
    """

    backend: str = ""
    frames: int = 0
    dropped: int = 0
    wall_seconds: float = 0.0
    samples: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STAGES})
    interrupted: bool = False
    resizes: int = 0
    decode_errors: int = 0
    damage: list[str] = field(default_factory=list)

    def record(self, times: dict[str, float]) -> None:
        """Add one frame's stage times (seconds)."""
        for stage, seconds in times.items():
            self.samples.setdefault(stage, []).append(seconds)
        self.frames += 1

    @property
    def fps(self) -> float:
        """Frames per second over the whole run."""
        return self.frames / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def summary(self) -> dict[str, dict[str, float]]:
        """Stage -> {p50, p95, p99, max, mean} in milliseconds, for stages that have samples."""
        result = {}
        for stage in STAGES:
            values = self.samples.get(stage)
            if not values:
                continue
            ms = np.asarray(values) * 1e3
            row = {f"p{p}": float(np.percentile(ms, p)) for p in PERCENTILES}
            row["max"] = float(ms.max())
            row["mean"] = float(ms.mean())
            result[stage] = row
        return result

    def to_dict(self) -> dict:
        """Everything, JSON-ready: totals, the per-stage summary (ms) and the raw samples (ms)."""
        return {
            "backend": self.backend,
            "frames": self.frames,
            "dropped": self.dropped,
            "interrupted": self.interrupted,
            "resizes": self.resizes,
            "decode_errors": self.decode_errors,
            "damage": self.damage,
            "wall_seconds": self.wall_seconds,
            "fps": self.fps,
            "stages_ms": self.summary(),
            "samples_ms": {k: [v * 1e3 for v in vals] for k, vals in self.samples.items() if vals},
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    def format_table(self) -> str:
        """A plain-text table: one row per stage with p50/p95/p99/max in ms, then totals."""
        header = f"{'stage':<9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        lines = [header, "-" * len(header)]
        for stage, row in self.summary().items():
            lines.append(f"{stage:<9}" + "".join(f"{row[k]:>9.3f}" for k in ("p50", "p95", "p99", "max")))
        tail = f"{self.frames} frames in {self.wall_seconds:.2f} s = {self.fps:.1f} fps"
        if self.dropped:
            tail += f", {self.dropped} dropped"
        if self.decode_errors:
            tail += f", {self.decode_errors} damaged input packet(s) or frame(s)"
        if self.interrupted:
            tail += " (interrupted)"
        lines.append(tail + f" [{self.backend}]")
        return "\n".join(lines)
