"""``streamconv bench``: timing the CUDA kernels, and its chart.

Also here: :mod:`.scale` (``streamconv bench --scale``: the scale stage on the GPU beside cv2.resize
and the CPU); :mod:`.temporal` (``streamconv bench --temporal``: the kernels of stages across frames
at 1080p and 4K RGB).
"""
