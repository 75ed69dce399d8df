"""Your own frames in your own loop: Filter and StreamFilter.

Modules: :mod:`.filter` (filtering your own frames: ``Filter`` (one call per frame));
:mod:`.streamfilter` (your frames through a backend's ring of slots, overlapped with your own loop);
:mod:`.streamfilter_map` (StreamFilter's map(): frames copied into their slots while the caller
works on the last output); :mod:`.streamfilter_tail` (StreamFilter's side of chains with stages
across frames: the slots that carry no output).
"""
