"""The shape of ``lib/jobguard``, measured from the code itself: module sizes, import
cycles, which layer imports which, and how many arguments a store method takes.

- **Size**: no module over ``MAX_LINES`` lines (one reason to change per module).
- **Cycles**: no cycle among jobguard's modules, counting every import in the code
  (a function-level import that breaks a cycle at load time still ties the two modules
  together; only ``if TYPE_CHECKING:`` imports are left out).
- **Layers** (``LAYERS``, lowest first): a module imports only its own layer and the ones
  below it. The runtime reaches the adapters' code through ``jobguard.ports``.
- **Store methods**: no public method of a store (the classes in ``STORES``) takes more
  than ``MAX_STORE_ARGS`` arguments besides ``self``.

``KNOWN`` lists what does not hold yet, each with its measure today: the test fails when
something new breaks a rule, when a listed entry gets worse, and when a listed entry
holds (the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "lib"
PACKAGE = ROOT / "jobguard"
MAX_LINES = 500
MAX_STORE_ARGS = 5
STORES = {
    "jobguard.dynamodb": ("DynamoJobStore",),
    # DynamoJobStore's parts, one per record kind (its bases)
    "jobguard._store_table": ("StoreTable",),
    "jobguard._store_lease": ("LeaseRows",),
    "jobguard._store_release": ("LeaseRelease",),
    "jobguard._store_operator": ("OperatorCommands",),
    "jobguard._store_triggers": ("TriggerItems",),
    "jobguard._store_runs": ("RunRecords",),
    "jobguard.dynamodb_items": ("DynamoItemStore",),
    "jobguard._item_writes": ("ItemWrites",),  # DynamoItemStore's writes (its base)
    "jobguard.ports": ("JobStore", "TriggerQueuePort", "ContinuationPort"),
    "jobguard.triggerqueue": ("TriggerQueue",),
}

# Lowest first. A module belongs to the first layer one of whose prefixes names it (the
# prefix "jobguard.cdk" holds jobguard.cdk and everything under it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", (
        "jobguard.errors", "jobguard.ids", "jobguard.clock", "jobguard.hooks",
        "jobguard.callsites", "jobguard.schema", "jobguard.names", "jobguard._bounds",
        "jobguard._durations", "jobguard._redact", "jobguard._safe_text", "jobguard._cron",
        "jobguard._launch", "jobguard._offline", "jobguard._clients", "jobguard.environment",
        "jobguard.config", "jobguard.records", "jobguard.workitems", "jobguard._work_keys",
        "jobguard.lease",
        "jobguard.triggers", "jobguard.trigger_state", "jobguard.observed", "jobguard.requests",
        "jobguard.ports",
        "jobguard._rejected", "jobguard.observability", "jobguard.definitions",
        "jobguard.deployment")),
    ("adapters", (
        "jobguard._dynamo", "jobguard._run_rows", "jobguard._item_rows", "jobguard._item_writes",
        "jobguard._store_table", "jobguard._store_lease", "jobguard._store_release",
        "jobguard._store_operator", "jobguard._store_triggers", "jobguard._store_runs",
        "jobguard.dynamodb",
        "jobguard.dynamodb_items", "jobguard.triggerqueue", "jobguard.continuation",
        "jobguard.destinations", "jobguard._destination_wire", "jobguard.faults")),
    ("runtime", (
        "jobguard.guard", "jobguard._guard_parts", "jobguard._guard_asks",
        "jobguard._guard_decisions", "jobguard._guard_run", "jobguard._guard_queue",
        "jobguard.run", "jobguard.claims", "jobguard._claim_outcomes",
        "jobguard._claim_reconcile", "jobguard._claim_reports", "jobguard._claim_values",
        "jobguard.batch",
        "jobguard.recovery", "jobguard._recovery_plan", "jobguard.registry",
        "jobguard.functions", "jobguard._drills", "jobguard.drill.switches")),
    ("tools", (
        "jobguard.cli", "jobguard.timeline", "jobguard.drill", "jobguard.local",
        "jobguard.testing", "jobguard.pytest_plugin", "jobguard.cdk", "jobguard.runbook",
        "jobguard.runbook_alarms", "jobguard.runbook_fleet")),
]
PACKAGE_INIT = "jobguard"  # the public names: it may import from every layer

# What does not hold yet (issue 32), with today's measure.
KNOWN_SIZES: dict[str, int] = {}
KNOWN_CYCLES: list[set[str]] = []
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_WIDE_METHODS: dict[str, int] = {}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                           for a in node.names]
            else:
                targets = [a.name for a in node.names]
            for target in targets:
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def layer(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            names_it = module == prefix or module.startswith(prefix + ".")
            if names_it and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    return None if best is None else best[0]


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    out = set()
    for module, targets in graph.items():
        if module == PACKAGE_INIT:
            continue
        mine = layer(module)
        for target in targets:
            theirs = layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                out.add((module, target))
    return out


def sizes() -> dict[str, int]:
    return {name: len(path.read_text().splitlines()) for name, path in modules().items()}


def wide_store_methods() -> dict[str, int]:
    out = {}
    for module, classes in STORES.items():
        path = modules()[module]
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.ClassDef) and node.name in classes):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    args = item.args
                    count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
                             - (1 if args.args and args.args[0].arg in ("self", "cls") else 0))
                    if count > MAX_STORE_ARGS:
                        out[f"{node.name}.{item.name}"] = count
    return out


def test_every_module_has_a_layer() -> None:
    """GIVEN every module of lib/jobguard WHEN its layer is looked up THEN it has one (a new
    module is placed on purpose)."""
    assert [m for m in modules() if m != PACKAGE_INIT and layer(m) is None] == []


def test_no_module_is_over_the_size_limit() -> None:
    """GIVEN every module WHEN its lines are counted THEN none is over MAX_LINES, but the
    ones still listed, each no longer than its listed count and still over the limit."""
    over = {m: n for m, n in sizes().items() if n > MAX_LINES}
    assert {m: n for m, n in over.items() if m not in KNOWN_SIZES} == {}
    assert {m: n for m, n in over.items() if n > KNOWN_SIZES.get(m, n)} == {}
    assert sorted(set(KNOWN_SIZES) - set(over)) == [], "under the limit now: unlist them"


def test_no_import_cycle() -> None:
    """GIVEN every import in the code (but type-checking ones) WHEN cycles are sought THEN
    there are none but the listed ones."""
    found = cycles(import_graph())
    assert [c for c in found if c not in KNOWN_CYCLES] == []
    assert [c for c in KNOWN_CYCLES if c not in found] == [], "gone now: unlist them"


def test_no_layer_imports_a_higher_one() -> None:
    """GIVEN LAYERS WHEN every import is placed THEN no module imports a higher layer but
    the listed imports."""
    found = upward_imports(import_graph())
    assert sorted(found - KNOWN_UPWARD) == []
    assert sorted(KNOWN_UPWARD - found) == [], "gone now: unlist them"


def test_no_store_method_takes_more_than_five_arguments() -> None:
    """GIVEN the store classes WHEN their public methods' parameters are counted THEN none
    takes more than MAX_STORE_ARGS but the listed ones, none wider than listed."""
    found = wide_store_methods()
    assert {k: v for k, v in found.items() if v > KNOWN_WIDE_METHODS.get(k, MAX_STORE_ARGS)} == {}
    assert sorted(set(KNOWN_WIDE_METHODS) - set(found)) == [], "narrow now: unlist them"


def test_the_measures_can_fail() -> None:
    """GIVEN a graph with a cycle and an upward import, and a module counted long WHEN
    measured THEN each is found (the rules cannot be blind)."""
    graph = {"jobguard.errors": {"jobguard.guard"}, "jobguard.guard": {"jobguard.errors"},
             "jobguard.cli": set()}
    assert cycles(graph) == [{"jobguard.errors", "jobguard.guard"}]
    assert upward_imports(graph) == {("jobguard.errors", "jobguard.guard")}
    assert layer("jobguard.timeline.html") == 3 and layer("jobguard.drill.switches") == 2
    assert sizes()["jobguard.trigger_state"] > 50
