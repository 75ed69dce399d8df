"""The kernel families, one module each beside its .cu file(s); :mod:`.base` says what a family
provides.

Adding a family: a module here with ``VARIANTS``, ``SAMPLE_BYTES``, ``prepare`` and
``kernel_plan``, its name in :data:`streamconv.backends.plan.FAMILIES` and (to let ``auto``
pick it) one row in :data:`streamconv.backends.plan.AUTO_TABLE`. The tap arithmetic the
families share lives here too: :mod:`.integer_taps` (taps as int8 digits over a power of two),
:mod:`.planar_taps` (conv2d_tcp.cu's fragments and sparse taps), :mod:`.rank1` (rank-1 factors)
and :mod:`.separable_tc` (sepconv_tc.cu's fragments).

Also here: :mod:`.register_blocked` (the ``register-blocked`` family: cuda/conv2d.cu);
:mod:`.resample` (the geometry stages' kernels, cuda/resample.cu: scale's tiles and tap tables,
crop's copy); :mod:`.separable` (the ``separable`` family: cuda/sepconv.cu); :mod:`.temporal` (the
``temporal`` family: the kernels of stages across frames); :mod:`.tensor_core` (the ``tensor-core``
family: cuda/conv2d_tc.cu, cuda/conv3_tc.cu for one 3x3 matrix); :mod:`.textbook` (the textbook
family: cuda/conv2d_textbook.cu).
"""
