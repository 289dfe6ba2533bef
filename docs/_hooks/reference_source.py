"""Reading the library for the reference pages: its sources parsed once per build, and
text made safe for a Markdown table cell."""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib" / "jobguard"

_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def _plain(text: str) -> str:
    for char in "\\[]*<|":
        text = text.replace(char, "\\" + char)
    return text


def cell(text: str) -> str:
    """``text`` on one line of a Markdown table cell: plain text, its code spans kept
    (``x`` or `x`), so ``[@SITE]`` in a help text is never read as a link."""
    out, at = [], 0
    for match in _CODE.finditer(text):
        out += [_plain(text[at:match.start()]),
                "`" + match.group(2) + "`"]
        at = match.end()
    out.append(_plain(text[at:]))
    return " ".join("".join(out).split())


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def sources() -> list[ast.Module]:
    """Every module of the library, parsed (once per build)."""
    return [parsed(path) for path in sorted(LIB.rglob("*.py"))]


def module(name: str) -> ast.Module:
    """``jobguard.<name>``, parsed."""
    return parsed(LIB / f"{name}.py")


def class_def(module_name: str, name: str) -> ast.ClassDef:
    """The class ``jobguard.<module_name>.<name>``, parsed."""
    for node in module(module_name).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"jobguard.{module_name} defines no class {name}")

def words(text: str) -> str:
    from griffe_docstrings import readable

    return cell(readable(text))

def cdk(module: str) -> ast.Module:
    return parsed(LIB / "cdk" / f"{module}.py")


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)

def constant(name: str) -> str | None:
    """A string constant by its name, wherever in the library it is defined."""
    for tree in sources():
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == name and isinstance(node.value, ast.Constant)):
                return str(node.value.value)
    return None
