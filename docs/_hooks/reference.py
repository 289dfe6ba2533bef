"""MkDocs hook: the reference pages' generated parts."""
from __future__ import annotations

import argparse
import ast
import re
import sys
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

    return build_parser()


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
    own, shared = [], []
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


def _module(name: str) -> ast.Module:
    return ast.parse((LIB / f"{name}.py").read_text())


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
        found = [n.args[0].value for n in ast.walk(value)
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
            return {k.arg: (read(k.value) or [""])[0] for k in node.value.keywords
                    if k.arg is not None}
    raise LookupError("jobguard.lease.parse_lease builds no LeaseState from the row")


def _schema_layout() -> str:
    doc = ast.get_docstring(_module("schema")) or ""
    table = [line for line in doc.splitlines() if line.startswith("|")]
    return "\n".join(line.replace("``", "`") for line in table) + "\n"


def records() -> str:
    """The run record's, the ledger row's and the lease row's fields, from their classes."""
    lease = lease_attributes()
    lease["exists"] = ""  # derived: the row exists (it has a fence)
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


GENERATORS = {"api-exports": api_exports, "constructs": constructs, "cli": cli,
              "records": records}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
