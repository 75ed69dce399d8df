"""The CUDA backend: slots in page-locked and device memory, the chain's kernels launched on CUDA
streams.

Also here: :mod:`.device_frames` (the CUDA backend's path for frames already in device memory: no
host buffer, no upload); :mod:`.host_frames` (the CUDA backend's one-frame-at-a-time path for host
frames (``Filter``): the fewest); :mod:`.stages` (the CUDA backend's chain loaded for one frame
shape: per stage its own module instance); :mod:`.temporal` (the CUDA backend for chains with stages
across frames: each temporal stage's last).
"""
