"""``python -m streamconv``: the same as the ``streamconv`` command."""

import sys

from .cli import main

sys.exit(main())
