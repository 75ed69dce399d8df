"""The NVDEC source: decoding on the GPU through PyNvVideoCodec.

Also here: :mod:`.bitstream` (what NVDEC is handed: the codec's name, Annex B NAL units and
sequence parameter sets, sequence headers); :mod:`.caps` (what NVDEC (the GPU's hardware decoders,
through PyNvVideoCodec) can decode on a device); :mod:`.gpu` (the CUDA side of the NVDEC source:
the device's primary context, a stream); :mod:`.log` (counting the pictures NVDEC decodes with
errors).
"""
