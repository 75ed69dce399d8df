"""``python -m streamconv.prebuild``: compile the catalogue's kernels into fatbins for the wheel
(the command; :mod:`streamconv.backends.prebuild` does the work)."""

import sys

from .backends.prebuild import main

if __name__ == "__main__":
    sys.exit(main())
