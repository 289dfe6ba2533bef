"""The call-site inventory: complete, declared next to each call, printed in the README."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

from botocore import xform_name

from jobguard.callsites import Fault, Handling, all_sites, render_table
from tests._docs import page

ROOT = Path(__file__).resolve().parents[2]
# AWS calls in lib/jobguard that are not call sites of a guarded job, with why.
EXEMPT = {"create_table", "update_time_to_live", "get_waiter"}  # setup, local and tests
# Modules whose AWS calls are not a guarded job's, with why (like local/ and drill/, which
# the scan below does not reach): the testing kit reads the emulator for a test.
EXEMPT_MODULES = {"jobguard.testing"}


def test_every_site_names_a_function_that_makes_its_call():
    for site in all_sites():
        module = importlib.import_module(site.module)
        target = module
        for part in site.function.split("."):
            target = getattr(target, part)
        source = inspect.getsource(target)
        method = xform_name(site.operation)
        via_transaction = method == "transact_write_items" and "self._transact(" in source
        assert f".{method}(" in source or via_transaction, \
            f"{site.name}: {site.function} makes no {method} call"
        assert set(site.handling) == set(Fault)
        assert all(isinstance(h, Handling) for h in site.handling.values())


def test_every_aws_call_in_the_library_is_a_declared_site():
    sites = all_sites()
    declared = {(s.module, xform_name(s.operation)) for s in sites}
    operations = {xform_name(s.operation) for s in sites} | {"query", "scan", "batch_get_item"}
    pattern = re.compile(r"(?:_client|client\([^)]*\)|\bclient)\.([a-z_]+)\(")
    lib = ROOT / "lib"
    # the top-level modules, and the CLI's package (cli.py split by command group)
    for path in [*(lib / "jobguard").glob("*.py"), *(lib / "jobguard" / "cli").glob("*.py")]:
        module = ".".join(path.relative_to(lib).with_suffix("").parts).removesuffix(".__init__")
        if module in EXEMPT_MODULES:
            continue
        for method in pattern.findall(path.read_text()):
            if method in EXEMPT or method not in operations | {"invoke", "put_object",
                                                                 "head_object"}:
                continue
            assert (module, method) in declared, f"{module} calls {method} with no CallSite"


def test_the_readme_prints_the_generated_table():
    readme = page("docs/explanation/testing.md")
    assert render_table() in readme, "regenerate: python -c 'from jobguard.callsites import " \
                                     "render_table; print(render_table())'"


def test_every_declared_site_is_a_row_of_a_matrix():
    from .test_continuation_sites import SITES as CONTINUATION_SITES
    from .test_matrix import RUN_PATH
    from .test_operator_matrix import OPERATOR_SITES
    from .test_trigger_sites import SITES as TRIGGER_SITES

    covered = set(RUN_PATH) | set(OPERATOR_SITES) | set(TRIGGER_SITES) | set(CONTINUATION_SITES)
    assert {s.name for s in all_sites()} == covered


_PARTS = {"Update", "Put", "Delete", "ConditionCheck", "Get"}


def _transaction_parts(module_name: str) -> dict[str, set[str]]:
    """Per method of the module's classes: the transaction action types (``{"Delete":
    ...}`` literals) it builds, itself or through the ``self.`` methods it calls."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    direct: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            name = f"{cls.name}.{method.name}"
            direct[name], calls[name] = set(), set()
            for node in ast.walk(method):
                if isinstance(node, ast.Dict):
                    direct[name] |= {k.value for k in node.keys
                                     if isinstance(k, ast.Constant) and k.value in _PARTS}
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "self"):
                    calls[name].add(f"{cls.name}.{node.func.attr}")

    def reach(name: str, seen: set[str]) -> set[str]:
        if name in seen:
            return set()
        seen.add(name)
        found = set(direct.get(name, ()))
        for callee in calls.get(name, ()):
            found |= reach(callee, seen)
        return found

    return {name: reach(name, set()) for name in direct}


def test_every_transaction_declares_the_action_types_its_code_builds():
    # AWS authorizes each action of a transaction by its own IAM action (a Delete needs
    # dynamodb:DeleteItem): the declared parts, from which IAM is derived, must be
    # exactly what the function (and the methods it calls) put in the transaction
    transactions = [s for s in all_sites() if s.operation.startswith("Transact")]
    assert transactions
    for site in transactions:
        built = _transaction_parts(site.module)[site.function]
        assert set(site.parts) == built, f"{site.name}: declares {site.parts}, builds {built}"
