"""The call-site inventory: complete, declared next to each call, printed in the README."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from botocore import xform_name

from jobguard.callsites import Fault, Handling, all_sites, render_table

ROOT = Path(__file__).resolve().parents[2]
# AWS calls in lib/jobguard that are not call sites of a guarded job, with why.
EXEMPT = {"create_table", "update_time_to_live", "get_waiter"}  # setup, local and tests


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
    for path in (ROOT / "lib" / "jobguard").glob("*.py"):
        module = f"jobguard.{path.stem}"
        for method in pattern.findall(path.read_text()):
            if method in EXEMPT or method not in operations | {"invoke", "put_object",
                                                                 "head_object"}:
                continue
            assert (module, method) in declared, f"{module} calls {method} with no CallSite"


def test_the_readme_prints_the_generated_table():
    readme = (ROOT / "README.md").read_text()
    assert render_table() in readme, "regenerate: python -c 'from jobguard.callsites import " \
                                     "render_table; print(render_table())'"


def test_every_declared_site_is_a_row_of_a_matrix():
    from .test_matrix import RUN_PATH
    from .test_operator_matrix import OPERATOR_SITES
    from .test_trigger_sites import SITES as TRIGGER_SITES

    covered = set(RUN_PATH) | set(OPERATOR_SITES) | set(TRIGGER_SITES)
    assert {s.name for s in all_sites()} == covered
