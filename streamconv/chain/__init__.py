"""What is computed: the filter registry, the spec grammar and the presets.

Also here: :mod:`.chain_string` (a chain of filter specs in one string, as ``-vf`` takes it:
``gaussian:sigma=2,size=5); :mod:`.filters` (the filter registry: names -> float32 taps (or banks of
taps) or a convolution layer); :mod:`.resample` (scale and crop stages: what they mean, the size
they give a frame, and the resampling taps); :mod:`.suggest` (one close match for a mistyped name (a
filter, a preset, an option): "did you mean ...?"); :mod:`.temporal` (taps across frames: T x K x K
float32 taps, their separable form).
"""
