"""The call-site inventory: complete, declared next to each call, printed in the README."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
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


def _store_parts() -> dict[str, str]:
    """The modules the job store is composed of (one per record kind), each mapped to
    ``jobguard.dynamodb``: they declare and make its calls as one unit, as the single
    module they were split from did (a transaction one part declares runs through the
    table part's ``_transact``)."""
    from jobguard.dynamodb import DynamoJobStore

    return {cls.__module__: "jobguard.dynamodb" for cls in DynamoJobStore.__mro__
            if cls.__module__.startswith("jobguard.")}


def test_every_aws_call_in_the_library_is_a_declared_site():
    sites = all_sites()
    unit = _store_parts()
    assert len(unit) > 2, unit  # the store is still composed of its parts
    declared = {(unit.get(s.module, s.module), xform_name(s.operation)) for s in sites}
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
            assert (unit.get(module, module), method) in declared, \
                f"{module} calls {method} with no CallSite"


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


def _runtime_class(cls: type) -> type:
    """The library's class whose instances run ``cls``'s methods: the store ``cls`` is a
    part of (``DynamoJobStore`` for its per-kind parts, ``DynamoItemStore`` for
    ``ItemWrites``), else ``cls`` itself."""
    below = [c for c in cls.__subclasses__() if c.__module__.startswith("jobguard.")]
    assert len(below) <= 1, f"{cls.__name__} is a part of {below}: name which store runs it"
    return _runtime_class(below[0]) if below else cls


def _transaction_parts(cls: type, method: str) -> set[str]:
    """The transaction action types (``{"Delete": ...}`` literals) ``cls.method`` builds,
    itself or through the ``self.`` methods it calls, each resolved as ``self`` resolves
    it: on the store ``cls`` is a part of (a store part builds its transaction with the
    table part's building blocks). A ``self.`` call that does not resolve fails the test."""
    cls = _runtime_class(cls)
    seen: set[str] = set()

    def reach(name: str) -> set[str]:
        if name in seen:
            return set()
        seen.add(name)
        function = inspect.getattr_static(cls, name)
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        found: set[str] = set()
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
            if isinstance(node, ast.Dict):
                found |= {k.value for k in node.keys
                          if isinstance(k, ast.Constant) and k.value in _PARTS}
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "self"):
                found |= reach(node.func.attr)
        return found

    return reach(method)


def test_every_transaction_declares_the_action_types_its_code_builds():
    # AWS authorizes each action of a transaction by its own IAM action (a Delete needs
    # dynamodb:DeleteItem): the declared parts, from which IAM is derived, must be
    # exactly what the function (and the methods it calls) put in the transaction
    transactions = [s for s in all_sites() if s.operation.startswith("Transact")]
    assert transactions
    for site in transactions:
        owner, method = site.function.rsplit(".", 1)
        built = _transaction_parts(getattr(importlib.import_module(site.module), owner), method)
        assert set(site.parts) == built, f"{site.name}: declares {site.parts}, builds {built}"
