"""The NVDEC source: decoding on the GPU through PyNvVideoCodec."""
