"""A griffe extension: the Sphinx roles of the docstrings (:class:`x`, :meth:`y`) shown as code."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj):`~?([^`]+)`")


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite each object's docstring once it is loaded: ``:class:`Filter``` -> ```Filter```."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
