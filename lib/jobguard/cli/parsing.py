"""argparse as the AWS CLI and kubectl refuse and take options: the global options,
given before or after the command, and one line naming what was wrong and the nearest
command or option (no usage dump). Changes when the way the command line is read
changes, never for one command's options (those are in ``jobguard.cli``)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from .._safe_text import safe_text
from .refusal import _nearest


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobguard")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes, before or after it (as the AWS CLI does). On a
    command they default to "not given", so they never undo one given before it."""
    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    group.add_argument("--output", choices=("table", "json", "text"), default=default(None),
                       help="table (default), json (for scripts) or text (tab-separated)")
    group.add_argument("--json", dest="output", action="store_const", const="json",
                       default=default(None), help="the same as --output json")
    group.add_argument("--endpoint-url", default=default(None),
                       help="AWS endpoint URL: the local AWS (default: AWS_ENDPOINT_URL)")
    group.add_argument("--profile", default=default(None),
                       help="AWS profile, as the AWS CLI takes it")
    group.add_argument("--region", default=default(None),
                       help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, then "
                            "the profile's, as the AWS CLI v2 takes them)")
    group.add_argument("--stack", default=default(None),
                       help="the CloudFormation stack built with jobguard.cdk: its outputs "
                            "name the table, the jobs and their functions, the recovery "
                            "function (default: JOBGUARD_STACK). The table is --table, else "
                            "--stack's, else JOBGUARD_TABLE, else JOBGUARD_STACK's")
    group.add_argument("--table", default=default(None),
                       help="the jobguard table, over the stack's (see --stack)")
    group.add_argument("--jobs-module", default=default(None),
                       help="module whose JOBS lists the job definitions (default: "
                            "JOBGUARD_JOBS_MODULE); imported only when named, looked for "
                            "in the installed packages, then in this folder. Without "
                            "--stack, runbook and drill need it; with one, every command "
                            "reads the jobs from the stack's outputs")


def _refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(2, f"{parser.prog}: error: {safe_text(message)} (see `{parser.prog} "
                   "--help`)\n")


class _Parser(argparse.ArgumentParser):
    """argparse, as the AWS CLI and kubectl refuse: one line naming what was wrong and
    the nearest command or option (Python 3.11's argparse suggests nothing), then where
    the help is; exit status 2. No usage dump."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument (\S+): invalid choice: '(.*?)' \(choose from (.*)\)$",
                          message, re.S)
        if choice:
            name, word, listed = choice.groups()
            choices = re.findall(r"'([^']*)'", listed)
            what = "command" if name == "COMMAND" else f"{name} value"
            message = (f"unknown {what} {word!r}{_nearest(word, choices)} (one of "
                       f"{', '.join(choices)})")
        _refuse(self, message)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            parser = self._commands.get(command, self) if command else self
            options = [o for a in parser._actions for o in a.option_strings]
            flag = next((e.split("=", 1)[0] for e in extras if e.startswith("-")), None)
            hint = _nearest(flag, options) if flag else ""
            _refuse(parser, f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    @property
    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}
