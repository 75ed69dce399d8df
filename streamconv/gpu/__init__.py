"""The CUDA binding beneath backends, nn, interop and the NVDEC source.

:mod:`.binding` (the seam: what GPU code asks of a binding, and which binding runs); the default
binding, cuda-bindings with cuda-core (:mod:`.cuda_core_binding`, its driver objects in
:mod:`.cuda_core_driver`, modules and launches in :mod:`.cuda_core_modules`), and PyCUDA's
(:mod:`.pycuda_binding`); :mod:`.handles` (driver calls on other libraries' raw stream and event
handles) and :mod:`.dlpack` (DLPack in and out). Nothing is imported here.

Also here: :mod:`.cache` (the per-user cache of kernels NVRTC compiled); :mod:`.device` (whether
CUDA can run here, and the device layer beneath backends and nn: the CUDA); :mod:`.loader` (the one
place CUDA kernels come from: prebuilt with the wheel, or compiled here, memoized); :mod:`.nvrtc`
(NVRTC, NVIDIA's run-time CUDA compiler); :mod:`.prebuilt` (kernels compiled when the wheel was
built: fatbins the driver loads without any compiler); :mod:`.setup` (the driver as ``libcuda.so.1``
reports it).
"""
