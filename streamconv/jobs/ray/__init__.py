"""Batches and segmented runs as Ray tasks (the ``ray`` extra)."""
