"""The documentation site's generated reference parts (``docs/_hooks/reference.py``).

The hook is called directly, as MkDocs calls it: each generated part must name what
the code defines (every command and option of the CLI's parser, every metric, every
alarm a construct creates, every field of the records), so a reference page cannot
fall behind the code silently. Nothing here builds the site.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import jobguard
from jobguard import observability
from jobguard.cli import build_parser
from jobguard.config import OverlapPolicy
from jobguard.lease import LeaseState
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.runbook import job_alarms, reconciler_alarms, recovery_alarms, table_alarms
from jobguard.runbook_fleet import fleet_alarms
from jobguard.workitems import ItemRecord, ItemState, JobRow

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "_hooks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    return _load("reference")


def _commands() -> dict[str, object]:
    import argparse

    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_page_placeholder_has_a_generator_and_is_replaced(hook: ModuleType) -> None:
    # GIVEN the reference pages as written
    pages = sorted((ROOT / "docs" / "reference").glob("*.md"))
    for page in pages:
        text = page.read_text()
        # WHEN the hook renders them
        out = hook.on_page_markdown(text)
        # THEN no placeholder is left, and each named one is a generator
        for line in text.splitlines():
            if line.startswith("<!-- generated:"):
                assert line.removeprefix("<!-- generated: ").removesuffix(" -->") \
                    in hook.GENERATORS, f"{page.name}: {line}"
        assert "<!-- generated:" not in out, page.name


def test_cli_page_names_every_command_and_option_of_the_parser(hook: ModuleType) -> None:
    page = hook.cli()
    commands = _commands()
    assert commands, "the parser has no commands"
    for name, parser in commands.items():
        assert f"### `jobguard {name}`" in page
        assert f"(#jobguard-{name})" in page  # listed in the commands table
        for action in parser._actions:  # type: ignore[attr-defined]
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page, f"jobguard {name} {option}"
            if not action.option_strings and action.metavar:
                assert f"`{action.metavar}`" in page, f"jobguard {name} {action.metavar}"


def test_cli_help_text_is_never_read_as_markdown_link(hook: ModuleType) -> None:
    # `local --faults` says KIND[:OPERATION][@SITE]: brackets stay text, escaped
    page = hook.cli()
    assert "KIND\\[:OPERATION\\]\\[@SITE\\]" in page


def test_metrics_page_names_every_metric_with_a_meaning(hook: ModuleType) -> None:
    page = hook.metrics()
    assert set(observability.METRIC_MEANINGS) == set(observability.METRICS)
    for name in observability.METRICS:
        line = next(row for row in page.splitlines() if row.startswith(f"| `{name}` |"))
        assert observability.METRIC_MEANINGS[name].split("`")[0][:20] in line.replace("\\", "")
    # the unit comes from how the library emits it
    assert "| `RunDuration` | Milliseconds |" in page
    assert "| `LeaseLost` | Count |" in page


def _example(policy: OverlapPolicy, hook: ModuleType) -> object:
    return hook.example_job(policy)


def test_every_alarm_of_every_construct_is_listed_with_what_it_watches(
        hook: ModuleType) -> None:
    page = hook.alarms()
    job = _example(OverlapPolicy.QUEUE, hook)
    expected = {
        "_job_alarms": {k for p in OverlapPolicy
                        for k in job_alarms(_example(p, hook))},
        "reconciler": set(reconciler_alarms(job, own_dead_letter_queue=True)),
        "recovery": set(recovery_alarms()),
    }
    for module, keys in expected.items():
        sites = hook.alarm_sites(module)
        # THEN the construct's code creates an alarm for every key the runbook has...
        assert keys <= set(sites), (module, keys - set(sites))
        for key in keys:
            # ...and the page says its construct id, what it watches, when it fires
            assert sites[key]["construct"] and sites[key]["watches"] and sites[key]["when"]
            assert sites[key]["construct"] in page
    fleet = fleet_alarms("ops", queues=True)
    sites = hook.fleet_sites(list(fleet))
    for key in fleet:
        assert sites[key]["watches"] and sites[key]["when"], key
    for key in table_alarms():
        assert f"| `{key}`: " in page
    assert "liveness" in page


def test_alarm_texts_on_the_page_are_the_runbooks(hook: ModuleType) -> None:
    page = hook.alarms()
    for policy in OverlapPolicy:
        for text in job_alarms(_example(policy, hook)).values():
            assert f"| `{text.key}`: {text.title} |" in page


@pytest.mark.parametrize(("module", "name", "cls"), [
    ("records", "RunRecord", RunRecord), ("workitems", "ItemRecord", ItemRecord),
    ("lease", "LeaseState", LeaseState), ("workitems", "JobRow", JobRow),
])
def test_records_page_has_every_field_of_each_record(
        hook: ModuleType, module: str, name: str, cls: type) -> None:
    read = [row[0] for row in hook.fields(module, name)]
    assert read == [f.name for f in dataclasses.fields(cls)]
    page = hook.records()
    for field in read:
        assert f"| `{field}` |" in page


def test_records_page_has_every_decision_status_and_item_state(hook: ModuleType) -> None:
    page = hook.records()
    for enum in (Decision, RunStatus, ItemState):
        for member in enum:
            assert f"| `{member.value}` |" in page


def test_lease_fields_name_the_attribute_parse_lease_reads(hook: ModuleType) -> None:
    from jobguard.lease import parse_lease

    stored = hook.lease_attributes()
    assert stored["owner"] == "holder_owner"
    assert stored["fence"] == "fence"
    # GIVEN a held row whose every attribute holds a value of its own
    row: dict[str, object] = {}
    for number, (field, attribute) in enumerate(sorted(stored.items())):
        if attribute:
            kind = next(f.type for f in dataclasses.fields(LeaseState) if f.name == field)
            row[attribute] = number + 1 if "int" in str(kind) else f"value-{number}"
    # WHEN parse_lease reads it, THEN each field holds its named attribute's value
    state = parse_lease("j", row)
    for field, attribute in stored.items():
        if attribute:
            assert getattr(state, field) == row[attribute], field
    assert {f.name for f in dataclasses.fields(LeaseState)} - {"job", "exists"} <= {
        f for f, a in stored.items() if a}


def test_api_page_documents_every_export(hook: ModuleType) -> None:
    page = hook.api_exports()
    assert [line.strip().removeprefix("::: jobguard.") for line in page.split("\n\n")
            if line.strip()] == list(jobguard.__all__)


def test_constructs_page_documents_every_construct(hook: ModuleType) -> None:
    page = hook.constructs()
    for name in ("JobTable", "LambdaBundle", "GuardedJob", "JobFleet", "Reconciler",
                 "RecoveryFunction", "JobGuardDashboard", "alarms_to_email",
                 "alarms_to_topic", "alarms_off"):
        assert f"::: jobguard.cdk.{name}\n" in page


def test_docstring_habits_are_rendered_as_the_google_parser_reads_them() -> None:
    readable = _load("griffe_docstrings").readable
    text = "Do it.\n\n    Example:\n        >>> x = 1\n\nSee :class:`~jobguard.errors.ConfigError`."
    out = readable(text)
    assert "    Examples:\n" in out
    assert "`ConfigError`" in out and ":class:" not in out


@pytest.mark.process
def test_the_hook_imports_neither_the_cdk_nor_boto3() -> None:
    # the build runs every generator; none may pull in the CDK or an AWS client
    code = ("import json, sys, runpy; h = runpy.run_path(sys.argv[1]); "
            "[f() for f in h['GENERATORS'].values()]; "
            "print(json.dumps([m for m in ('aws_cdk', 'boto3', 'botocore') "
            "if m in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'lib'}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-c", code, str(HOOKS / "reference.py")],
                          capture_output=True, text=True, env=env, check=True, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_protocol_pages_diagram_is_the_transition_table(hook: ModuleType) -> None:
    """GIVEN TRANSITIONS (the specification) WHEN the protocol page is built THEN its state
    diagram has one edge per (from, to) pair of the table, labelled with every event of
    that pair, and every state of the machine in it; the page holds the placeholder."""
    from jobguard.trigger_state import TRANSITIONS, State

    page = (ROOT / "docs" / "explanation" / "protocol.md").read_text()
    built = hook.on_page_markdown(page)
    assert "<!-- generated: trigger-states -->" in page and "<!--" not in built.split(
        "stateDiagram-v2", 1)[1].split("```", 1)[0]
    diagram = built.split("```mermaid\nstateDiagram-v2\n", 1)[1].split("```", 1)[0]
    lines = diagram.strip().splitlines()
    pairs = {("[*]" if t.source is None else t.source.value,
              "[*]" if t.target is None else t.target.value) for t in TRANSITIONS}
    assert len(lines) == len(pairs)
    for t in TRANSITIONS:
        source = "[*]" if t.source is None else t.source.value
        target = "[*]" if t.target is None else t.target.value
        (line,) = [ln for ln in lines if ln.strip().startswith(f"{source} --> {target}:")]
        assert t.event.value.replace("_", " ") in line.split(":", 1)[1]
    assert {s.value for s in State} <= set(diagram.replace(":", " ").split())


def _unplaced(pages: dict[str, str], generators: dict[str, object]) -> list[str]:
    """The generators no page places (their part would be missing from the site)."""
    return sorted(key for key in generators
                  if not any(f"<!-- generated: {key} -->" in text for text in pages.values()))


def test_every_generated_part_is_placed_on_a_page(hook: ModuleType) -> None:
    """GIVEN the site's pages WHEN a page loses its placeholder (an edit that deletes
    the line, or spells it ``<!--generated: cli-->``) THEN that generator is named: the
    CLI page would otherwise build as an empty page with every test passing."""
    pages = {p.name: p.read_text() for p in (ROOT / "docs").rglob("*.md")
             if "_hooks" not in p.parts}
    assert _unplaced(pages, hook.GENERATORS) == []
    broken = {**pages, "cli.md": pages["cli.md"].replace("<!-- generated: cli -->",
                                                         "<!--generated: cli-->")}
    assert _unplaced(broken, hook.GENERATORS) == ["cli"]


def _unlisted(page: str, commands: dict[str, object]) -> list[str]:
    """Each ``command option`` (or positional) the command's own section does not show;
    the global options are checked once, in their own section."""
    import argparse

    missing = []
    for name, parser in commands.items():
        assert isinstance(parser, argparse.ArgumentParser)
        head = f"### `jobguard {name}`"
        section = page.split(head, 1)[1].split("\n### ", 1)[0] if head in page else ""
        for group in parser._action_groups:
            own = group.title != "global options"
            where = section if own else page.split("## Commands", 1)[0]
            for action in group._group_actions:
                if isinstance(action, argparse._HelpAction):
                    continue
                shown = action.option_strings or [str(action.metavar or action.dest)]
                missing += [f"{name} {s}" for s in shown
                            if f"`{s}" not in where and f"{s}`" not in where]
    return missing


def test_each_commands_section_lists_its_own_options(hook: ModuleType) -> None:
    """GIVEN the CLI page WHEN a command's section loses its options table (another
    command having the same option, e.g. --html, is not enough) THEN it is named."""
    page, commands = hook.cli(), _commands()
    assert _unlisted(page, commands) == []
    head = "### `jobguard timeline`"
    section = page.split(head, 1)[1].split("\n### ", 1)[0]
    cut = page.replace(section, section.split("| argument |")[0])
    assert "timeline --html" in _unlisted(cut, commands)
    # the check this one tightens passes on that page: an option anywhere will do
    assert "`--html" in cut
