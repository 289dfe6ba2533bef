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


GENERATORS = {"api-exports": api_exports}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
