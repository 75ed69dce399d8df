"""The text overlay of the display window and of each tile of a wall: where it goes, how it is
drawn, and the frame rate it shows."""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_FONT_SCALE = 0.5
_LINE_HEIGHT = 20
_OVERLAY_LINES = 2


def overlay_box(frame_width: int) -> tuple[int, int, int, int]:
    """The region (x, y, width, height) in window pixels that the overlay may cover: the top
    left of the first panel (the input, when side by side), at most ``frame_width`` wide."""
    return 0, 0, min(frame_width, 460), _LINE_HEIGHT * _OVERLAY_LINES + 8


def draw_overlay(canvas: np.ndarray, lines: Sequence[str], left: int, top: int, width: int,
                 height: int) -> None:
    """Darken the box at (left, top) of ``canvas`` (an (H, W, 3) uint8 BGR host image) and write
    ``lines`` in it; darkened, not blanked, so the frame stays visible behind the text."""
    region = canvas[top:top + min(height, canvas.shape[0] - top), left:left + width]
    # Written into a copy of the box: a line longer than the box is cut at its edge instead of
    # running on into the panel beside it.
    box = region // 3
    for number, line in enumerate(lines):
        cv2.putText(box, line, (6, _LINE_HEIGHT * (number + 1)), _FONT, _FONT_SCALE,
                    (255, 255, 255), 1, cv2.LINE_AA)
    region[...] = box


def recent_fps(shown_at: Sequence[float]) -> float:
    """Frames per second over the recent display times ``shown_at`` (seconds, oldest first)."""
    if len(shown_at) < 2:
        return 0.0
    span = shown_at[-1] - shown_at[0]
    return (len(shown_at) - 1) / span if span > 0 else 0.0
