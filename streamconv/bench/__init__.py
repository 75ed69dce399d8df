"""``streamconv bench``: timing the CUDA kernels, and its chart."""
