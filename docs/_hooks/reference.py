"""MkDocs hook: the reference pages' generated parts."""
from __future__ import annotations

import argparse
import ast
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

LIB = Path(__file__).resolve().parents[2] / "lib" / "jobguard"
for _folder in (LIB.parent, Path(__file__).resolve().parent):  # lib/, and this folder
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


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


# -- the CLI -----------------------------------------------------------------------------

_GLOBAL = "global options"


def cli_parser() -> argparse.ArgumentParser:
    """The ``jobguard`` command's own parser (``jobguard.cli`` imports no AWS client)."""
    from jobguard.cli import build_parser

    parser: argparse.ArgumentParser = build_parser()
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command of ``parser``, in the order ``jobguard --help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def _plain(text: str) -> str:
    for char in "\\[]*<|":
        text = text.replace(char, "\\" + char)
    return text


def _cell(text: str) -> str:
    """``text`` on one line of a Markdown table cell: plain text, its code spans kept
    (``x`` or `x`), so ``[@SITE]`` in a help text is never read as a link."""
    out, at = [], 0
    for match in _CODE.finditer(text):
        out += [_plain(text[at:match.start()]),
                "`" + match.group(2) + "`"]
        at = match.end()
    out.append(_plain(text[at:]))
    return " ".join("".join(out).split())


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return text


def _options_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> str:
    formatter = parser._get_formatter()
    rows = ["| argument | what it does |", "|---|---|"]
    for action in actions:
        if action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        notes = []
        if action.choices is not None and "{" not in invocation:
            notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.required and action.option_strings:
            notes.append("required")
        extra = f" ({'; '.join(notes)})" if notes else ""
        rows.append(f"| `{_cell(invocation)}` | {_cell(_help(action, parser.prog))}{extra} |")
    return "\n".join(rows) + "\n"


def _groups(parser: argparse.ArgumentParser) -> tuple[list[argparse.Action], list[argparse.Action]]:
    own: list[argparse.Action] = []
    shared: list[argparse.Action] = []
    for group in parser._action_groups:
        for action in group._group_actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            (shared if group.title == _GLOBAL else own).append(action)
    return own, shared


def cli() -> str:
    """Every ``jobguard`` command: its usage, help, arguments; the global options once."""
    parser = cli_parser()
    commands = subcommands(parser)
    top_own, shared = _groups(parser)
    out = [
        "## Global options",
        "",
        "Every command takes these, before or after its name.",
        "",
        _options_table(parser, top_own + shared),
        "## Commands",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    out += [f"| [`{name}`](#jobguard-{name}) | {_cell(cmd.description or '')} |"
            for name, cmd in commands.items()]
    out.append("")
    for name, cmd in commands.items():
        own, _ = _groups(cmd)
        formatter = cmd._get_formatter()
        formatter.add_usage(None, own, [], prefix="")
        usage = " ".join(formatter.format_help().split())
        out += [f"### `jobguard {name}` {{#jobguard-{name}}}", "",
                _cell(cmd.description or ""), "",
                "```text", f"{usage} [global options]", "```", ""]
        if own:
            out += [_options_table(cmd, own)]
        if cmd.epilog:
            out += [_cell(cmd.epilog), ""]
    return "\n".join(out) + "\n"


# -- records -----------------------------------------------------------------------------


@cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _sources() -> list[ast.Module]:
    """Every module of the library, parsed (once per build)."""
    return [_parsed(path) for path in sorted(LIB.rglob("*.py"))]


def _module(name: str) -> ast.Module:
    return _parsed(LIB / f"{name}.py")


def _class(module: str, name: str) -> ast.ClassDef:
    for node in _module(module).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"jobguard.{module} defines no class {name}")


def _words(text: str) -> str:
    from griffe_docstrings import readable

    return _cell(readable(text))


def _documented(body: list[ast.stmt]) -> list[tuple[ast.stmt, str]]:
    """Each statement of a class body with the docstring written under it ("" if none)."""
    found = []
    for index, node in enumerate(body):
        after = body[index + 1] if index + 1 < len(body) else None
        doc = (after.value.value if isinstance(after, ast.Expr)
               and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)
               else "")
        found.append((node, doc))
    return found


def _default(value: ast.expr | None) -> str:
    if value is None:
        return "required"
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "field"):
        for keyword in value.keywords:
            if keyword.arg == "default_factory":
                return f"`{ast.unparse(keyword.value)}()`"
            if keyword.arg == "default":
                return f"`{ast.unparse(keyword.value)}`"
    return f"`{ast.unparse(value)}`"


def fields(module: str, name: str) -> list[tuple[str, str, str, str]]:
    """(field, type, default, meaning) of the dataclass ``jobguard.<module>.<name>``, read
    from its source: its annotated class attributes and the docstring under each."""
    rows = []
    for node, doc in _documented(_class(module, name).body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            rows.append((node.target.id, ast.unparse(node.annotation), _default(node.value),
                         doc))
    return rows


def members(module: str, name: str) -> list[tuple[str, str, str]]:
    """(member, value, meaning) of the enum ``jobguard.<module>.<name>``, from its source."""
    rows = []
    for node, doc in _documented(_class(module, name).body):
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)):
            rows.append((node.targets[0].id, str(node.value.value), doc))
    return rows


def _fields_table(module: str, name: str, stored: dict[str, str] | None = None) -> str:
    head = "| field | type | default | meaning |"
    if stored is not None:
        head = "| field | stored as | type | default | meaning |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for field, kind, default, doc in fields(module, name):
        where = [] if stored is None else [f"`{stored[field]}`" if stored.get(field)
                                            else "(not stored)"]
        rows.append("| " + " | ".join([f"`{field}`", *where, _cell(f"`{kind}`"), default,
                                       _words(doc)]) + " |")
    return "\n".join(rows) + "\n"


def _members_table(module: str, name: str) -> str:
    rows = ["| value | meaning |", "|---|---|"]
    rows += [f"| `{value}` | {_words(doc)} |" for _, value, doc in members(module, name)]
    return "\n".join(rows) + "\n"


def lease_attributes() -> dict[str, str]:
    """Each ``LeaseState`` field and the lease row attribute it is read from, as
    ``jobguard.lease.parse_lease`` reads it ("" where no attribute holds it)."""
    tree = _module("lease")
    parse = next(n for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name == "parse_lease")
    assigned = {n.targets[0].id: n.value for n in ast.walk(parse)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}

    def read(value: ast.expr, seen: frozenset[str] = frozenset()) -> list[str]:
        found = [str(n.args[0].value) for n in ast.walk(value)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "get" and isinstance(n.func.value, ast.Name)
                 and n.func.value.id == "row" and n.args
                 and isinstance(n.args[0], ast.Constant)]
        for n in ast.walk(value):
            if isinstance(n, ast.Name) and n.id in assigned and n.id not in seen:
                found += read(assigned[n.id], seen | {n.id})
        return found

    for node in ast.walk(parse):
        if (isinstance(node, ast.Return) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "LeaseState" and node.value.keywords):
            # a comparison (``exists=fence is not None``) is derived, not an attribute
            return {k.arg: "" if isinstance(k.value, ast.Compare) else (read(k.value) or [""])[0]
                    for k in node.value.keywords if k.arg is not None}
    raise LookupError("jobguard.lease.parse_lease builds no LeaseState from the row")


def _schema_layout() -> str:
    doc = ast.get_docstring(_module("schema")) or ""
    table = [line for line in doc.splitlines() if line.startswith("|")]
    return "\n".join(line.replace("``", "`") for line in table) + "\n"


def records() -> str:
    """The run record's, the ledger row's and the lease row's fields, from their classes."""
    lease = lease_attributes()
    return "\n".join([
        "## Where each row lives", "",
        "One DynamoDB table holds every job (`jobguard.schema`):", "",
        _schema_layout(),
        "## Run record", "",
        "`jobguard.records.RunRecord`: one per trigger decision, and for runs one per "
        "execution attempt. `extra` holds what the run recorded beside these fields "
        "(item counts, cursor range, a recovery's figures); `as_dict()` (the CLI's JSON, "
        "the logs) puts its keys beside the others and adds `duration_ms`.", "",
        _fields_table("records", "RunRecord"),
        "### Decision", "", "`decision`: what the trigger did (`jobguard.records.Decision`).",
        "", _members_table("records", "Decision"),
        "### Status", "", "`status`: where the run ended; a trigger that did not run "
        "carries its decision (`jobguard.records.RunStatus`).", "",
        _members_table("records", "RunStatus"),
        "## Item ledger row", "",
        "`jobguard.workitems.ItemRecord`: one work item as the ledger gives it back (a "
        "completion or an unresolved row; a claimed item is read from the job row's open "
        "claim).", "",
        _fields_table("workitems", "ItemRecord"),
        "### Item state", "", "`state` (`jobguard.workitems.ItemState`).", "",
        _members_table("workitems", "ItemState"),
        "## Lease row", "",
        "`jobguard.lease.LeaseState`: the job's lease row as jobguard reads it; *stored "
        "as* is the row's attribute each field is read from, found in "
        "`jobguard.lease.parse_lease` (`job` comes from the row's key).", "",
        _fields_table("lease", "LeaseState", stored=lease),
        "## Job row", "",
        "`jobguard.workitems.JobRow`: the fence high-water mark, the checkpoint and the "
        "open claim of one job.", "",
        _fields_table("workitems", "JobRow"),
        "### Checkpoint", "", _fields_table("workitems", "Checkpoint"),
        "### Open claim", "", _fields_table("workitems", "OpenClaim"),
    ])


# -- metrics and alarms ----------------------------------------------------------------


def metric_units() -> dict[str, str]:
    """Each metric the library times (``telemetry.milliseconds("Name", ...)``), read from
    every module's source; the rest are counts (``count``)."""
    units = {}
    for tree in _sources():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "milliseconds" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                units[str(node.args[0].value)] = "Milliseconds"
    return units


def _watchers() -> dict[str, list[str]]:
    """Each JobGuard metric and the alarms (``Construct key``) that watch it."""
    from jobguard.runbook_fleet import fleet_alarms

    found: dict[str, list[str]] = {}
    sources = [("GuardedJob", alarm_sites("guarded_job")),
               ("Reconciler", alarm_sites("reconciler"))]
    fleet = fleet_alarms("ops", queues=True)
    sources.append(("JobFleet", {k: {"watches": f"JobGuard `{a.metric}`"}
                                 for k, a in fleet.items() if a.metric}))
    from jobguard.config import OverlapPolicy
    from jobguard.runbook import busy_metric

    for policy in OverlapPolicy:  # the busy alarm watches the metric of the job's policy
        busy = busy_metric(example_job(policy))
        if busy is not None:
            found.setdefault(busy[0], []).append(f"GuardedJob `busy` ({policy.value})")
    for construct, sites in sources:
        for key, site in sites.items():
            match = re.match(r"JobGuard `(\w+)`", site.get("watches", ""))
            if match:
                found.setdefault(match.group(1), []).append(f"{construct} `{key}`")
    return found


def metrics() -> str:
    """Every metric of ``jobguard.observability.METRICS``: unit, dimensions, meaning, and
    the alarms that watch it."""
    from jobguard import observability as o

    units, watchers = metric_units(), _watchers()
    rows = ["| metric | unit | meaning | at rest | alarms on it |", "|---|---|---|---|---|"]
    for name in o.METRICS:
        rows.append(f"| `{name}` | {units.get(name, 'Count')} | "
                    f"{_cell(o.METRIC_MEANINGS.get(name, ''))} | "
                    f"{'yes' if name in o.AT_REST_METRICS else ''} | "
                    f"{', '.join(watchers.get(name, []))} |")
    service = next(ast.literal_eval(n.value) for n in _cdk("alarms").body  # its SERVICE
                   if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                   and n.targets[0].id == "SERVICE")
    return "\n".join([
        f"Namespace `{o.NAMESPACE}`. Dimensions: `{o.JOB_DIMENSION}` (the job's name) and "
        f"`service` (`{service}`); a job of a `JobFleet` carries `{o.FLEET_DIMENSION}` (the "
        f"fleet's name) instead of `{o.JOB_DIMENSION}`, and its name as the EMF property "
        f"`{o.JOB_DIMENSION}`. *At rest*: what a healthy run that completes items emits, "
        "the custom metrics a deployment is billed for when nothing happens. The alarms "
        "are listed below.", "",
        *rows, ""])


_HELPERS = ("runbook_alarm", "dlq_alarm", "errors_alarm", "throttles_alarm",
            "async_dropped_alarm")
_COMPARISON = {"GREATER_THAN_OR_EQUAL_TO_THRESHOLD": ">=", "GREATER_THAN_THRESHOLD": ">",
               "LESS_THAN_THRESHOLD": "<", "LESS_THAN_OR_EQUAL_TO_THRESHOLD": "<="}


def _cdk(module: str) -> ast.Module:
    return _parsed(LIB / "cdk" / f"{module}.py")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _helper_docs() -> dict[str, str]:
    """Each alarm helper of ``jobguard.cdk.alarms``: the first line of its docstring."""
    return {n.name: (ast.get_docstring(n) or "").split("\n")[0]
            for n in _cdk("alarms").body
            if isinstance(n, ast.FunctionDef) and n.name in _HELPERS}


def _constant(name: str) -> str | None:
    """A string constant by its name, wherever in the library it is defined."""
    for tree in _sources():
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == name and isinstance(node.value, ast.Constant)):
                return str(node.value.value)
    return None


def _watched(metric: ast.expr | None, assigned: dict[str, ast.expr]) -> str:
    """What a ``metric=`` argument watches, in words."""
    if isinstance(metric, ast.Name) and metric.id in assigned:
        metric = assigned[metric.id]
    if not isinstance(metric, ast.Call):
        return "" if metric is None else f"`{ast.unparse(metric)}`"
    func = metric.func
    named = func.id if isinstance(func, ast.Name) else func.attr if isinstance(
        func, ast.Attribute) else ""
    if named in ("job_metric", "metric", "Metric"):
        name_arg = (_keyword(metric, "metric_name")
                    or (metric.args[1] if named == "job_metric" else
                        metric.args[0] if metric.args else None))
        name = (str(name_arg.value) if isinstance(name_arg, ast.Constant)
                else _constant(name_arg.id) if isinstance(name_arg, ast.Name) else None)
        namespace = _keyword(metric, "namespace")
        space = str(namespace.value) if isinstance(namespace, ast.Constant) else "JobGuard"
        statistic = _keyword(metric, "statistic")
        how = str(statistic.value) if isinstance(statistic, ast.Constant) else "Sum"
        if name is None:
            return f"{space}: the job's metric for its policy ({how})"
        return f"{space} `{name}` ({how})"
    if named.startswith("metric_") and isinstance(func, ast.Attribute):
        words = "".join(part.title() for part in named.removeprefix("metric_").split("_"))
        owner = ast.unparse(func.value).removeprefix("self.").replace("_", " ")
        statistic = _keyword(metric, "statistic")
        how = f" ({statistic.value!s})" if isinstance(statistic, ast.Constant) else ""
        return f"`{words}`{how} of the {owner}"
    return f"`{ast.unparse(metric)}`"


def _key(call: ast.Call, target: ast.expr | None) -> str | None:
    """The runbook key an alarm is filed under: ``alarms["key"] = ...``, or the key its
    runbook text is looked up by (``texts["key"]``, ``runbook("key")``)."""
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return str(target.slice.value)
    runbook = _keyword(call, "runbook")
    for node in ast.walk(runbook) if runbook is not None else ():
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return str(node.slice.value)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.endswith("_alarm") and node.func.id != "from_text"):
            return node.func.id.removesuffix("_alarm")
    return None


def alarm_sites(module: str) -> dict[str, dict[str, str]]:
    """Every alarm ``jobguard.cdk.<module>`` creates, by runbook key: its construct id,
    what it watches and when it fires, read from the calls of the alarm helpers."""
    docs, found = _helper_docs(), {}
    tree = _cdk(module)
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        assigned = {n.targets[0].id: n.value for n in ast.walk(function)
                    if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
        targets: dict[int, ast.expr] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                targets[id(node.value)] = node.targets[0]
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant):
                        targets[id(v)] = ast.Subscript(ast.Name("_"), k)
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in _HELPERS):
                continue
            key = _key(node, targets.get(id(node)))
            if key is None:
                continue
            found[key] = _site(node, assigned, docs)
    return found


def _site(node: ast.Call, assigned: dict[str, ast.expr],
          docs: dict[str, str]) -> dict[str, str]:
    """One call of an alarm helper: its construct id, what it watches, when it fires."""
    helper = node.func.id if isinstance(node.func, ast.Name) else ""
    if helper == "runbook_alarm":
        watches = _watched(_keyword(node, "metric"), assigned)
        threshold = _keyword(node, "threshold")
        comparison = _keyword(node, "comparison")
        sign = (_COMPARISON.get(comparison.attr, comparison.attr)
                if isinstance(comparison, ast.Attribute) else ">=")
        when = f"{sign} `{ast.unparse(threshold)}`" if threshold else ""
    else:
        queue = node.args[2] if len(node.args) > 2 else None  # self.failed_ticks: named
        target = ast.unparse(queue).removeprefix("self.") if isinstance(
            queue, ast.Attribute) else ""
        watches = docs.get(helper, "").rstrip(".") + (f" (`{target}`)" if target else "")
        when = ">= `1`"
    periods = _keyword(node, "evaluation_periods")
    if periods is not None:
        when += f" for `{ast.unparse(periods)}` periods"
    missing = _keyword(node, "missing_data")
    if isinstance(missing, ast.Attribute) and missing.attr == "BREACHING":
        when += "; no data breaches"
    construct = node.args[1] if len(node.args) > 1 else None
    return {"construct": (f"`{construct.value!s}`" if isinstance(construct, ast.Constant)
                          else ""),
            "watches": watches, "when": when}


def _branch_keys(test: ast.expr) -> list[str] | None:
    """The keys an ``if key == "x"`` / ``if key in ("x", "y")`` test picks (None: a test
    on something else, such as ``key in paused``)."""
    if isinstance(test, ast.Compare) and len(test.comparators) == 1:
        right = test.comparators[0]
        if isinstance(right, ast.Constant):
            return [str(right.value)]
        if isinstance(right, ast.Tuple | ast.List | ast.Set):
            return [str(e.value) for e in right.elts if isinstance(e, ast.Constant)]
    return None


def fleet_sites(keys: list[str]) -> dict[str, dict[str, str]]:
    """The fleet's alarms, made in one loop over its table whose ``if``/``elif`` chain
    says how each key is watched: each of ``keys`` given its branch's call."""
    docs = _helper_docs()
    method = next(n for n in ast.walk(_cdk("fleet")) if isinstance(n, ast.FunctionDef)
                  and n.name == "_alarms")
    assigned = {n.targets[0].id: n.value for n in ast.walk(method)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    chain = next(n for n in ast.walk(method) if isinstance(n, ast.If))
    branches: list[tuple[list[str] | None, list[ast.stmt]]] = []
    node = chain
    while True:
        branches.append((_branch_keys(node.test) or [], node.body))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        if node.orelse:
            branches.append((None, node.orelse))  # else: every other key
        break
    found = {}
    for key in keys:
        for picks, body in branches:
            call = next((n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Name) and n.func.id in _HELPERS), None)
            if call is not None and (picks is None or key in picks
                                     or (key.startswith("paused") and picks == [])):
                found[key] = _site(call, assigned, docs)
                break
    return found


def example_job(policy: Any) -> Any:
    """The job the alarm texts below are rendered for."""
    from datetime import timedelta

    from jobguard.definitions import JobDefinition

    return JobDefinition(name="crm-sync", handler="jobs.crm_sync.handler",
                         schedule="rate(5 minutes)", policy=policy,
                         timeout=timedelta(minutes=4), lease=timedelta(minutes=2),
                         overlap_alarm_share=0.75, reconciler_schedule="rate(1 hour)")


def _alarms_table(texts: Any, sites: dict[str, dict[str, str]],
                  policies: dict[tuple[str, str], str] | None = None) -> str:
    """One row per alarm text (``texts``: a mapping or a list of ``AlarmText``); with
    ``policies``, the policies that get each (key, title)."""
    head = ["alarm", "construct id", "watches", "fires when", "what it means; decide"]
    if policies is not None:
        head.insert(1, "policies")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for text in (texts.values() if isinstance(texts, dict) else texts):
        site = sites.get(text.key, {})
        cells = [f"`{text.key}`: {_cell(text.title)}", site.get("construct", ""),
                 _cell(site.get("watches", "")), _cell(site.get("when", "")),
                 f"{_cell(text.means)} **Decide:** {_cell(text.decide)}"]
        if policies is not None:
            cells.insert(1, policies.get((text.key, text.title), ""))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def alarms() -> str:
    """Every alarm the constructs create: the words from ``jobguard.runbook`` (what the
    alarm's description and ``jobguard runbook`` say), what it watches from the
    construct's code."""
    from jobguard.config import OverlapPolicy
    from jobguard.runbook import job_alarms, reconciler_alarms, recovery_alarms, table_alarms
    from jobguard.runbook_fleet import fleet_alarms, liveness_alarm

    texts: dict[tuple[str, str], Any] = {}  # a key whose words differ by policy: a row each
    policies: dict[tuple[str, str], list[str]] = {}
    for policy in OverlapPolicy:
        for key, text in job_alarms(example_job(policy)).items():
            texts.setdefault((key, text.title), text)
            policies.setdefault((key, text.title), []).append(policy.value)
    every = len(OverlapPolicy)
    which = {k: "all" if len(v) == every else ", ".join(v) for k, v in policies.items()}
    job = example_job(OverlapPolicy.QUEUE)
    fleet = fleet_alarms("ops", queues=True)
    sites = fleet_sites(list(fleet))
    for key, alarm in fleet.items():  # a metric the table names, not the code
        site = sites.setdefault(key, {})
        if alarm.metric is not None and "`" not in site.get("watches", "`"):
            site["watches"] = f"JobGuard `{alarm.metric}` (Sum)"
        # the construct id is made from the key: f"{pascal(key)}Alarm"
        site["construct"] = "`" + "".join(part.title() for part in key.split("_")) + "Alarm`"
    fleet_job = alarm_sites("guarded_job")
    fleet_job_texts = {"liveness": liveness_alarm(job, job.no_success_window().span),
                       "trigger_queue_age": job_alarms(job)["trigger_queue_age"]}
    return "\n".join([
        "### GuardedJob", "",
        "Each job's own alarms (`GuardedJob.alarms`, by key). Which ones a job gets depends "
        "on its policy; `overlap` only with an `overlap_alarm_share`, `no_success` only "
        "where its schedule is enabled.", "",
        _alarms_table(list(texts.values()), alarm_sites("guarded_job"), which),
        "### A job of a JobFleet", "",
        "A job deployed in a `JobFleet` keeps only these of its own; the fleet's alarms "
        "watch the rest.", "",
        _alarms_table(fleet_job_texts, fleet_job),
        "### JobFleet", "",
        "One alarm per failure mode for the whole fleet, on metrics every job of the fleet "
        "shares (`JobFleet.alarms`); each text says how to find the job.", "",
        _alarms_table({k: a.text for k, a in fleet.items()}, sites),
        "### Reconciler", "",
        _alarms_table(reconciler_alarms(job, own_dead_letter_queue=True),
                      alarm_sites("reconciler")),
        "### RecoveryFunction", "",
        _alarms_table(recovery_alarms(), alarm_sites("recovery")),
        "### JobTable", "",
        _alarms_table(table_alarms(), _table_sites()),
    ])


def _table_sites() -> dict[str, dict[str, str]]:
    """The table's two alarms: made in a loop over (key, construct id, metric)."""
    for node in ast.walk(_cdk("alarms")):
        if isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Tuple):
            rows = [ast.literal_eval(row) for row in node.iter.elts]
            return {key: {"construct": f"`{construct}`",
                          "watches": f"AWS/DynamoDB `{metric}` of the table (Sum)",
                          "when": ">= `1`"} for key, construct, metric in rows}
    return {}


GENERATORS = {"api-exports": api_exports, "constructs": constructs, "cli": cli,
              "records": records, "metrics": metrics, "alarms": alarms}


def on_pre_build(**kwargs: Any) -> None:
    _parsed.cache_clear()  # `mkdocs serve` rebuilds after an edit: read the sources again


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
