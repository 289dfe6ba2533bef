"""What users import and type is pinned: a change to it is a decision, not a side effect.

The public surface is read from the code on every run and compared with
``tests/unit/api_pin.json``:

- ``jobguard.__all__`` and ``jobguard.testing.__all__``: every name, what it is, and for
  each function, class and public method its signature (parameter names, kinds,
  defaults and annotations), each enum's members, each dataclass's fields;
- the ``jobguard`` command: every command, its positional arguments and options (flags,
  ``nargs``, choices, defaults, required), read from the command's own parser;
- the CDK constructs (``jobguard.cdk.__all__``): every construct's and function's
  parameters, read from the source (no CDK import, so this stays a fast test).

A refactoring keeps it green. A change that means to alter the API rewrites the file
with ``python -m tests.unit.test_api_pin --write`` and shows the difference in its
commit.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).with_name("api_pin.json")
CDK = ROOT / "lib" / "jobguard" / "cdk"


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(no signature)"


def _describe(obj: Any) -> dict[str, Any]:
    if inspect.isclass(obj):
        out: dict[str, Any] = {"kind": "class", "bases": [b.__name__ for b in obj.__mro__[1:]
                                                           if b.__module__.startswith("jobguard")]}
        if issubclass(obj, enum.Enum):
            out["members"] = {m.name: repr(m.value) for m in obj}
            return out
        if dataclasses.is_dataclass(obj):
            out["fields"] = [f"{f.name}: {f.type}" for f in dataclasses.fields(obj)]
        if issubclass(obj, BaseException):
            out["init"] = _signature(obj.__init__)
            return out
        if not dataclasses.is_dataclass(obj):
            out["init"] = _signature(obj)
        members = {}
        for name, value in sorted(vars(obj).items()):
            if name.startswith("_"):
                continue
            if isinstance(value, property):
                members[name] = "property"
            elif isinstance(value, (staticmethod, classmethod)):
                members[name] = f"{type(value).__name__}{_signature(value.__func__)}"
            elif inspect.isfunction(value):
                members[name] = f"method{_signature(value)}"
        out["members"] = members
        return out
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return {"kind": "function", "signature": _signature(obj)}
    if isinstance(obj, enum.Enum):
        return {"kind": "member", "value": repr(obj.value)}
    return {"kind": type(obj).__name__}


def python_api(module_name: str) -> dict[str, Any]:
    module = importlib.import_module(module_name)
    return {name: _describe(getattr(module, name)) for name in sorted(module.__all__)}


def _action(action: argparse.Action) -> dict[str, Any]:
    out: dict[str, Any] = {"dest": action.dest}
    if action.nargs is not None:
        out["nargs"] = action.nargs
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        out["choices"] = [str(c) for c in action.choices]
    if action.required:
        out["required"] = True
    if action.default not in (None, argparse.SUPPRESS):
        out["default"] = repr(action.default)
    if action.const is not None:
        out["const"] = repr(action.const)
    out["action"] = type(action).__name__
    return out


def _parser(parser: argparse.ArgumentParser) -> dict[str, Any]:
    out: dict[str, Any] = {"positional": {}, "options": {}, "commands": {}}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            out["commands"] = {name: _parser(sub) for name, sub in action.choices.items()}
        elif action.option_strings:
            out["options"][" ".join(sorted(action.option_strings))] = _action(action)
        else:
            out["positional"][action.dest] = _action(action)
    return {k: v for k, v in out.items() if v}


def cli_api() -> dict[str, Any]:
    from jobguard.cli import build_parser

    return _parser(build_parser())


def _params(args: ast.arguments) -> list[str]:
    out = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        if arg.arg in ("self", "cls"):
            continue
        out.append(_param(arg, default))
    if args.vararg:
        out.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        out.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(_param(arg, default))
    if args.kwarg:
        out.append("**" + args.kwarg.arg)
    return out


def _param(arg: ast.arg, default: ast.expr | None) -> str:
    text = arg.arg
    if arg.annotation is not None:
        text += ": " + ast.unparse(arg.annotation)
    if default is not None:
        text += " = " + ast.unparse(default)
    return text


def construct_api() -> dict[str, Any]:
    """``jobguard.cdk.__all__``: each name's parameters, from the module that defines it."""
    init = ast.parse((CDK / "__init__.py").read_text())
    where: dict[str, str] = {}
    names: list[str] = []
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
    out: dict[str, Any] = {}
    for name in sorted(names):
        tree = ast.parse((CDK / f"{where[name]}.py").read_text())
        node = next(n for n in tree.body
                    if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
        if isinstance(node, ast.FunctionDef):
            out[name] = {"kind": "function", "parameters": _params(node.args)}
            continue
        entry: dict[str, Any] = {"kind": "class"}
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                entry["parameters"] = _params(item.args)
            elif isinstance(item, ast.Assign):
                targets = [t.id for t in item.targets if isinstance(t, ast.Name)]
                entry.setdefault("members", []).extend(
                    f"{t} = {ast.unparse(item.value)}" for t in targets if not t.startswith("_"))
            elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                entry.setdefault("methods", {})[item.name] = _params(item.args)
        out[name] = entry
    return out


def public_api() -> dict[str, Any]:
    return {
        "jobguard": python_api("jobguard"),
        "jobguard.testing": python_api("jobguard.testing"),
        "cli": cli_api(),
        "jobguard.cdk": construct_api(),
    }


def _diff(pinned: Any, live: Any, path: str = "") -> list[str]:
    if isinstance(pinned, dict) and isinstance(live, dict):
        out = []
        for key in sorted(set(pinned) | set(live)):
            where = f"{path}.{key}" if path else key
            if key not in live:
                out.append(f"removed: {where}")
            elif key not in pinned:
                out.append(f"added: {where}")
            else:
                out.extend(_diff(pinned[key], live[key], where))
        return out
    return [] if pinned == live else [f"changed: {path}: {pinned!r} -> {live!r}"]


def test_the_public_api_is_the_pinned_one() -> None:
    """GIVEN the API pinned in api_pin.json WHEN it is read from the code THEN every
    name, signature, command and option is the same (a difference is listed by path)."""
    pinned = json.loads(PINNED.read_text())
    differences = _diff(pinned, public_api())
    assert not differences, (
        "the public API changed (python -m tests.unit.test_api_pin --write pins the "
        "new one, if that is the intent):\n" + "\n".join(differences))


def test_the_pin_sees_a_change() -> None:
    """GIVEN the pinned API WHEN one option, one parameter default and one name are changed
    in a copy THEN the comparison names each of them (the pin cannot be blind)."""
    live = public_api()
    changed = json.loads(json.dumps(live))
    changed["cli"]["commands"]["runs"]["options"].pop(next(iter(
        changed["cli"]["commands"]["runs"]["options"])))
    changed["jobguard"].pop("guarded")
    changed["jobguard.cdk"]["GuardedJob"]["parameters"].append("extra: int = 1")
    found = _diff(live, changed)
    assert any(d.startswith("removed: cli.commands.runs.options.") for d in found), found
    assert "removed: jobguard.guarded" in found, found
    assert any(d.startswith("changed: jobguard.cdk.GuardedJob.parameters") for d in found), found
    assert len(public_api()["cli"]["commands"]) >= 10
    assert len(public_api()["jobguard.cdk"]) == 12


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.unit.test_api_pin --write")
    PINNED.write_text(json.dumps(public_api(), indent=1, sort_keys=True) + "\n")
    print(f"pinned: {PINNED.relative_to(ROOT)}")
