"""Frame sinks: each takes the filtered frames."""
