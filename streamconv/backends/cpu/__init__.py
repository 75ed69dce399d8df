"""The CPU backend: NumPy and OpenCV, the reference the GPU is held to.

Also here: :mod:`.ops` (OpenCV and a thread pool on host frames, for the CPU backend: per-thread
scratch buffers); :mod:`.plan` (how each filter stage runs on the CPU backend); :mod:`.resample`
(the CPU reference of the geometry stages); :mod:`.temporal` (the CPU reference for chains with
stages across frames: the oracle the GPU is held to).
"""
