"""One stream: a source, a chain and a sink run through the slot ring.

Also here: :mod:`.epochs` (a Pipeline's run as epochs: one backend and one set of slots each);
:mod:`.inflight` (the slots a backend is working on, finished in the order they were
submitted); :mod:`.options` (the arguments of one run that need no source, checked before any is
opened: Pipeline's); :mod:`.pipeline` (a source, a filter chain and a sink, run as epochs of the
slot ring (:mod:`.ring`)); :mod:`.progress` (one-line progress on a terminal's stderr: a bar for
runs of known length); :mod:`.progressfile` (machine-readable progress (``--progress``): FFmpeg's
``-progress`` blocks of key=value); :mod:`.settings` (how a run runs, settled once: RunSettings);
:mod:`.steering` (the handle a sink that steers a run gets of a Pipeline: stop, swap the chain,
status); :mod:`.stats` (per-frame, per-stage timings: percentiles, a summary table and JSON, in
bounded memory); :mod:`.timeline` (each written frame's place in a run, for the report's timeline:
when its read began).
"""
