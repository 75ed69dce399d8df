"""Draw media/strip.png, the README's picture: one frame of sample.mp4 through a few filters.

    python media/make_strip.py [--frame 45] [--out media/strip.png]

Each tile is a real output of ``streamconv run`` (the same command a user types, written as an
image sequence and read back), scaled to half size and labelled with the options that made it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
TILES = [  # label, the run's chain options
    ("input", ["--filter", "identity"]),
    ("--pipeline edge", ["--pipeline", "edge"]),
    ("--filter gaussian:sigma=3", ["--filter", "gaussian:sigma=3"]),
    ("--pipeline emboss", ["--pipeline", "emboss"]),
]
LABEL_HEIGHT = 30
"""Pixels of the band under each tile that holds its label."""


def run_frame(source: Path, chain: list[str], frame: int, folder: Path) -> np.ndarray:
    """Frame ``frame`` (from 0) of ``streamconv run SOURCE CHAIN``, as H x W x 3 uint8 BGR."""
    pattern = folder / "tile%03d.png"
    command = [sys.executable, "-m", "streamconv", "run", str(source), *chain, "-o", str(pattern),
               "--max-frames", str(frame + 1), "--quiet", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"make_strip.py: {' '.join(command[1:])}: exit {run.returncode}\n{run.stderr}")
    image = cv2.imread(str(folder / f"tile{frame + 1:03d}.png"), cv2.IMREAD_COLOR)
    if image is None:
        raise SystemExit(f"make_strip.py: streamconv wrote no frame {frame} of {source}")
    return image


def labelled(image: np.ndarray, label: str) -> np.ndarray:
    """``image`` at half size above a white band holding ``label``."""
    small = cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2),
                       interpolation=cv2.INTER_AREA)
    band = np.full((LABEL_HEIGHT, small.shape[1], 3), 255, np.uint8)
    cv2.putText(band, label, (8, LABEL_HEIGHT - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1,
                cv2.LINE_AA)
    return np.vstack([small, band])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=REPO / "media" / "sample.mp4")
    parser.add_argument("--frame", type=int, default=45, help="which frame, from 0 (default 45)")
    parser.add_argument("--out", type=Path, default=REPO / "media" / "strip.png")
    args = parser.parse_args()
    tiles = []
    for label, chain in TILES:
        with tempfile.TemporaryDirectory() as folder:
            tiles.append(labelled(run_frame(args.source, chain, args.frame, Path(folder)), label))
    gap = np.full((tiles[0].shape[0], 4, 3), 255, np.uint8)
    strip = np.hstack([part for tile in tiles for part in (tile, gap)][:-1])
    if not cv2.imwrite(str(args.out), strip, [cv2.IMWRITE_PNG_COMPRESSION, 9]):
        raise SystemExit(f"make_strip.py: cannot write {args.out}")
    print(f"wrote {args.out} ({strip.shape[1]}x{strip.shape[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
