"""Every file streamconv reads from or writes for the user, and the package's own data folders.

Modules: :mod:`.inputs` (the files an input spec reads, so that nothing streamconv writes is ever
one of them); :mod:`.leftovers` (temporary files and folders a killed writer left behind, told apart
from ones in use); :mod:`.numbered` (numbered file names: FFmpeg's image-sequence patterns
(``img%04d.png``) and the files); :mod:`.publish` (every file streamconv writes: never an input,
never clobbered, complete or absent); :mod:`.resources` (where the package's data folders are: the
CUDA sources and the pipeline presets); :mod:`.standard_streams` (the command's standard streams
when they are closed); :mod:`.tapfiles` (taps and layer weights as the user writes them: inline
text, text files and .npy files).
"""
