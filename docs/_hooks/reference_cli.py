"""The CLI page: every ``jobguard`` command, from the command's own parser."""
from __future__ import annotations

import argparse

from reference_source import cell

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
        rows.append(f"| `{cell(invocation)}` | {cell(_help(action, parser.prog))}{extra} |")
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
    out += [f"| [`{name}`](#jobguard-{name}) | {cell(cmd.description or '')} |"
            for name, cmd in commands.items()]
    out.append("")
    for name, cmd in commands.items():
        own, _ = _groups(cmd)
        formatter = cmd._get_formatter()
        formatter.add_usage(None, own, [], prefix="")
        usage = " ".join(formatter.format_help().split())
        out += [f"### `jobguard {name}` {{#jobguard-{name}}}", "",
                cell(cmd.description or ""), "",
                "```text", f"{usage} [global options]", "```", ""]
        if own:
            out += [_options_table(cmd, own)]
        if cmd.epilog:
            out += [cell(cmd.epilog), ""]
    return "\n".join(out) + "\n"
