"""The kernel families, one module each, its .cu files in the folder of ``cuda/`` named as the
module; :mod:`.base` says what a family provides.

Adding a family: a module here with ``SOURCES``, ``VARIANTS``, ``SAMPLE_BYTES``, ``prepare`` and
``kernel_plan``, its kernels in ``cuda/<module>/``, its name in
:data:`streamconv.backends.plan.FAMILIES` and (to let ``auto`` pick it) one row in
:data:`streamconv.backends.plan.AUTO_TABLE`. The tap arithmetic the families share lives here
too: :mod:`.integer_taps` (taps as int8 digits over a power of two), :mod:`.planar_taps`
(conv2d_tcp.cu's fragments and sparse taps), :mod:`.rank1` (rank-1 factors) and
:mod:`.separable_tc` (sepconv_tc.cu's fragments).

Also here: :mod:`.register_blocked` (the ``register-blocked`` family: conv2d.cu);
:mod:`.resample` (the geometry stages' kernels, resample.cu: scale's tiles and tap tables, crop's
copy); :mod:`.separable` (the ``separable`` family: sepconv.cu, sepconv_tc.cu); :mod:`.temporal`
(the ``temporal`` family: the kernels of stages across frames); :mod:`.tensor_core` (the
``tensor-core`` family: conv2d_tc.cu, conv3_tc.cu for one 3x3 matrix, conv2d_tcp.cu);
:mod:`.textbook` (the textbook family: conv2d_textbook.cu).
"""
