"""``python -m streamconv``: the same as the ``streamconv`` command."""

from .launch import main  # first: it holds SIGINT and SIGTERM before anything else is imported

raise SystemExit(main())
