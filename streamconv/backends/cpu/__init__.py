"""The CPU backend: NumPy and OpenCV, the reference the GPU is held to."""
