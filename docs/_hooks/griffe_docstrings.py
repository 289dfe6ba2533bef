"""Griffe extension: the library's docstrings as mkdocstrings' Google parser reads them.

The docstrings are Google style with two habits from Sphinx: a singular ``Example:``
heading (Google's parser knows only ``Examples:``, and would leave the doctest as
plain Markdown, where ``rows[-1]["id"]`` reads as a broken link) and roles such as
``:class:`~jobguard.errors.ConfigError``` (shown as code here, by their last name when
written with ``~``). The source stays as it is; only what the site shows changes.
"""
from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example::?\s*$", re.M)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def readable(text: str) -> str:
    """``text`` with ``Example:`` headings made ``Examples:`` and roles made code."""
    return _ROLE.sub(_role, _EXAMPLE.sub(r"\1Examples:", text))


class SphinxHabits(griffe.Extension):
    """Rewrites each docstring once, as it is read."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = readable(obj.docstring.value)
