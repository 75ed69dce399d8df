"""Many streams: batches, segmented runs and several sources at once.

Also here: :mod:`.batch` (many inputs in one process: each through its own Pipeline, ``jobs`` at a
time on each GPU); :mod:`.batch_workers` (how a batch's pending inputs run: worker threads or worker
processes); :mod:`.inputs` (what a batch reads and writes: its inputs); :mod:`.manifest` (a batch's
manifest: one record per input (status, frames, fps, exit code, output, error));
:mod:`.manifest_lock` (one batch at a time per manifest); :mod:`.ray`/ (batches and segmented runs
as Ray tasks (the ``ray`` extra)); :mod:`.segment_work` (how each segment of a segmented run is
made: its Pipeline into its part file); :mod:`.segments` (a segmented run: one file cut at
keyframes, the segments filtered and encoded at once); :mod:`.worker` (running a batch's inputs: one
input through its own Pipeline (:func:`run_input`)).
"""
