"""Batches and segmented runs as Ray tasks (the ``ray`` extra).

Modules: :mod:`.batch` (a batch across machines on Ray (the ``ray`` extra): each input one Ray
task); :mod:`.segments` (a segmented run's segments as Ray tasks).
"""
