"""The sizes the scale tests resize between, and a real frame to resize."""

from __future__ import annotations

import av
import numpy as np


# (H, W, C) in -> (w, h) out: up and down, odd sizes, one side growing while the other shrinks,
# single pixels, and a 16x reduction (the most one stage takes).
RESIZES = [((37, 53, 3), (20, 15)), ((13, 11, 1), (29, 40)), ((40, 70, 4), (33, 31)),
           ((9, 130, 3), (9, 3)), ((1, 1, 3), (7, 5)), ((5, 7, 3), (1, 1)), ((48, 64, 3), (4, 3))]


def real_frame(sample_clip) -> np.ndarray:
    """The sample clip's first frame, 360 x 640 RGB."""
    with av.open(str(sample_clip)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")
