"""MkDocs hook: the reference pages' generated parts."""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

LIB = Path(__file__).resolve().parents[2] / "lib" / "jobguard"
if str(LIB.parent) not in sys.path:  # the build is run with PYTHONPATH=lib; so are tests
    sys.path.insert(0, str(LIB.parent))


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


def _cell(text: str) -> str:
    """``text`` on one line of a Markdown table: as plain text (its backticks kept as
    code), so ``[@SITE]`` in a help text is never read as a link."""
    for char in "\\[]*<|":
        text = text.replace(char, "\\" + char)
    return " ".join(text.split())


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


GENERATORS = {"api-exports": api_exports, "constructs": constructs, "cli": cli}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for key, make in GENERATORS.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
