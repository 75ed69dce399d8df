"""What every benchmark records about the code it measured."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def commit() -> str:
    """The commit measured: STREAMCONV_COMMIT (for trees copied without .git), else git's HEAD."""
    named = os.environ.get("STREAMCONV_COMMIT", "")
    if named:
        return named
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent)
    except OSError:
        return "unknown"
    return head.stdout.strip() or "unknown"
