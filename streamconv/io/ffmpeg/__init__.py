"""What sources and sinks both ask of PyAV and libav."""
