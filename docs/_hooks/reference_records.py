"""The records page: the fields of the rows jobguard writes, from the classes that read
them (their annotated fields and the docstring under each), read statically."""
from __future__ import annotations

import ast

from reference_source import cell, class_def, module, words


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
    for node, doc in _documented(class_def(module, name).body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            rows.append((node.target.id, ast.unparse(node.annotation), _default(node.value),
                         doc))
    return rows


def members(module: str, name: str) -> list[tuple[str, str, str]]:
    """(member, value, meaning) of the enum ``jobguard.<module>.<name>``, from its source."""
    rows = []
    for node, doc in _documented(class_def(module, name).body):
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
        rows.append("| " + " | ".join([f"`{field}`", *where, cell(f"`{kind}`"), default,
                                       words(doc)]) + " |")
    return "\n".join(rows) + "\n"


def _members_table(module: str, name: str) -> str:
    rows = ["| value | meaning |", "|---|---|"]
    rows += [f"| `{value}` | {words(doc)} |" for _, value, doc in members(module, name)]
    return "\n".join(rows) + "\n"


def lease_attributes() -> dict[str, str]:
    """Each ``LeaseState`` field and the lease row attribute it is read from, as
    ``jobguard.lease.parse_lease`` reads it ("" where no attribute holds it)."""
    tree = module("lease")
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
    doc = ast.get_docstring(module("schema")) or ""
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
