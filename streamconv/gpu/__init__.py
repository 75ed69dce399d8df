"""The CUDA binding beneath backends, nn, interop and the NVDEC source.

:mod:`.binding` (the seam: what GPU code asks of a binding, and which binding runs); the default
binding, cuda-bindings with cuda-core (:mod:`.cuda_core_binding`, its driver objects in
:mod:`.cuda_core_driver`, modules and launches in :mod:`.cuda_core_modules`), and PyCUDA's
(:mod:`.pycuda_binding`); :mod:`.handles` (driver calls on other libraries' raw stream and event
handles) and :mod:`.dlpack` (DLPack in and out). Nothing is imported here.
"""
