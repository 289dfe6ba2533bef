"""The example handlers are what users copy: they import only public names (no private
module, no hook points, no drill switches), and the library, not the handler, fires the
``before_destination`` point a drill fails."""

from __future__ import annotations

import ast
from pathlib import Path

import jobguard

HANDLERS = sorted((Path(__file__).resolve().parents[2] / "handlers").glob("*.py"))
PLUMBING = ("jobguard.hooks", "jobguard.drill", "jobguard.faults", "jobguard.testing",
            "jobguard.local")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) for every name the file imports from jobguard."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jobguard"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.startswith("jobguard")]
    return found


def test_the_example_handlers_import_only_public_names() -> None:
    assert {p.name for p in HANDLERS} >= {"crm_sync.py", "report_export.py", "jobs.py"}
    for path in HANDLERS:
        for module, name in _imports(path):
            where = f"{path.name}: from {module} import {name}"
            assert not any(part.startswith("_") for part in module.split(".")), where
            assert not module.startswith(PLUMBING) and name not in ("hooks", "fire"), where
            assert not name.startswith("_"), where
            if module == "jobguard":
                assert name in jobguard.__all__, where
            else:  # a public module: the name is in its __all__
                imported = __import__(module, fromlist=[name])
                assert name in getattr(imported, "__all__", [name]), where


def test_the_example_handlers_fire_no_hook_points() -> None:
    for path in HANDLERS:
        calls = {node.func.attr for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        assert "fire" not in calls, path.name
        assert "jobguard._" not in path.read_text(), path.name
