"""MkDocs hook: the reference pages' generated parts."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

LIB = Path(__file__).resolve().parents[2] / "lib" / "jobguard"


def _exports() -> list[str]:
    tree = ast.parse((LIB / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError("jobguard/__init__.py has no __all__")


def api_exports() -> str:
    return "\n\n".join(f"::: jobguard.{name}" for name in _exports()) + "\n"


CONSTRUCTS = ("JobTable", "LambdaBundle", "GuardedJob", "JobFleet", "Reconciler",
              "RecoveryFunction", "JobGuardDashboard", "alarms_to_email", "alarms_to_topic",
              "alarms_off")
"""The constructs page, in the order a stack builds them (every one in
``jobguard.cdk.__all__`` but the two helper types their signatures name)."""


def constructs() -> str:
    return "\n\n".join(f"::: jobguard.cdk.{name}" for name in CONSTRUCTS) + "\n"


GENERATORS = {"api-exports": api_exports, "constructs": constructs}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
