"""MkDocs hook: the reference pages' generated parts.

A page holds ``<!-- generated: NAME -->`` where a part goes; :func:`on_page_markdown`
puts there what ``GENERATORS[NAME]`` makes from the code: the API and constructs
pages' mkdocstrings directives (``jobguard.__all__``, read statically), the CLI
(``reference_cli``), the records (``reference_records``), the metrics and alarms
(``reference_alarms``), the protocol page's state diagram (``reference_states``).
Nothing here imports the CDK or an AWS client.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
for _folder in (_HERE.parents[1] / "lib", _HERE):  # jobguard, and this hook's modules
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from reference_alarms import alarm_sites, alarms, example_job, fleet_sites, metrics  # noqa: E402
from reference_cli import cli, subcommands  # noqa: E402
from reference_records import fields, lease_attributes, members, records  # noqa: E402
from reference_source import LIB, parsed  # noqa: E402
from reference_states import trigger_states  # noqa: E402

__all__ = ["GENERATORS", "alarm_sites", "alarms", "api_exports", "cli", "constructs",
           "example_job", "fields", "fleet_sites", "lease_attributes", "members", "metrics",
           "on_page_markdown", "on_pre_build", "records", "subcommands", "trigger_states"]


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


GENERATORS = {"api-exports": api_exports, "constructs": constructs, "cli": cli,
              "records": records, "metrics": metrics, "alarms": alarms,
              "trigger-states": trigger_states}


def on_pre_build(**kwargs: Any) -> None:
    parsed.cache_clear()  # `mkdocs serve` rebuilds after an edit: read the sources again


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
