"""The CUDA backend: slots in page-locked and device memory, the chain's kernels launched on CUDA
streams."""
