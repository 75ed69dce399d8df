"""Many streams: batches, segmented runs and several sources at once."""
