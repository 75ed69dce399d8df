"""Frame sources: each fills a pipeline's slots."""
