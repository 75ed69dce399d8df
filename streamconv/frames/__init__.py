"""The contract between io and backends: slots, frame checks, and the frame maths both backends
share."""
