"""``python -m streamconv``: the same as the ``streamconv`` command."""

import sys

from .launch import main

sys.exit(main())
