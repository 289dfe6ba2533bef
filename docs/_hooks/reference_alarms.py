"""The metrics and alarms page: ``METRICS``, and every alarm the constructs create: its
words from ``jobguard.runbook``, what it watches from the constructs' own calls."""
from __future__ import annotations

import ast
import re
from typing import Any

from reference_source import cdk, cell, constant, keyword, sources


def metric_units() -> dict[str, str]:
    """Each metric the library times (``telemetry.milliseconds("Name", ...)``), read from
    every module's source; the rest are counts (``count``)."""
    units = {}
    for tree in sources():
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
    sources = [("GuardedJob", alarm_sites("_job_alarms")),
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
                    f"{cell(o.METRIC_MEANINGS.get(name, ''))} | "
                    f"{'yes' if name in o.AT_REST_METRICS else ''} | "
                    f"{', '.join(watchers.get(name, []))} |")
    service = next(ast.literal_eval(n.value) for n in cdk("alarms").body  # its SERVICE
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

def _helper_docs() -> dict[str, str]:
    """Each alarm helper of ``jobguard.cdk.alarms``: the first line of its docstring."""
    return {n.name: (ast.get_docstring(n) or "").split("\n")[0]
            for n in cdk("alarms").body
            if isinstance(n, ast.FunctionDef) and n.name in _HELPERS}

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
        name_arg = (keyword(metric, "metric_name")
                    or (metric.args[1] if named == "job_metric" else
                        metric.args[0] if metric.args else None))
        name = (str(name_arg.value) if isinstance(name_arg, ast.Constant)
                else constant(name_arg.id) if isinstance(name_arg, ast.Name) else None)
        namespace = keyword(metric, "namespace")
        space = str(namespace.value) if isinstance(namespace, ast.Constant) else "JobGuard"
        statistic = keyword(metric, "statistic")
        how = str(statistic.value) if isinstance(statistic, ast.Constant) else "Sum"
        if name is None:
            return f"{space}: the job's metric for its policy ({how})"
        return f"{space} `{name}` ({how})"
    if named.startswith("metric_") and isinstance(func, ast.Attribute):
        words = "".join(part.title() for part in named.removeprefix("metric_").split("_"))
        owner = _own(func.value).replace("_", " ")
        statistic = keyword(metric, "statistic")
        how = f" ({statistic.value!s})" if isinstance(statistic, ast.Constant) else ""
        return f"`{words}`{how} of the {owner}"
    return f"`{ast.unparse(metric)}`"


def _own(expr: ast.expr) -> str:
    """An attribute of the construct an alarm is made for, without the construct: ``self.x``
    in a construct's method, ``guarded.x`` in ``jobguard.cdk._job_alarms`` (a job's)."""
    return ast.unparse(expr).removeprefix("self.").removeprefix("guarded.")


def _key(call: ast.Call, target: ast.expr | None) -> str | None:
    """The runbook key an alarm is filed under: ``alarms["key"] = ...``, or the key its
    runbook text is looked up by (``texts["key"]``, ``runbook("key")``)."""
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        return str(target.slice.value)
    runbook = keyword(call, "runbook")
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
    tree = cdk(module)
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
        watches = _watched(keyword(node, "metric"), assigned)
        threshold = keyword(node, "threshold")
        comparison = keyword(node, "comparison")
        sign = (_COMPARISON.get(comparison.attr, comparison.attr)
                if isinstance(comparison, ast.Attribute) else ">=")
        when = f"{sign} `{ast.unparse(threshold)}`" if threshold else ""
    else:
        queue = node.args[2] if len(node.args) > 2 else None  # guarded.failed_ticks: named
        target = _own(queue) if isinstance(queue, ast.Attribute) else ""
        watches = docs.get(helper, "").rstrip(".") + (f" (`{target}`)" if target else "")
        when = ">= `1`"
    periods = keyword(node, "evaluation_periods")
    if periods is not None:
        when += f" for `{ast.unparse(periods)}` periods"
    missing = keyword(node, "missing_data")
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
    method = next(n for n in ast.walk(cdk("fleet")) if isinstance(n, ast.FunctionDef)
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
        cells = [f"`{text.key}`: {cell(text.title)}", site.get("construct", ""),
                 cell(site.get("watches", "")), cell(site.get("when", "")),
                 f"{cell(text.means)} **Decide:** {cell(text.decide)}"]
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
    fleet_job = alarm_sites("_job_alarms")
    fleet_job_texts = {"liveness": liveness_alarm(job, job.no_success_window().span),
                       "trigger_queue_age": job_alarms(job)["trigger_queue_age"]}
    return "\n".join([
        "### GuardedJob", "",
        "Each job's own alarms (`GuardedJob.alarms`, by key). Which ones a job gets depends "
        "on its policy; `overlap` only with an `overlap_alarm_share`, `no_success` only "
        "where its schedule is enabled.", "",
        _alarms_table(list(texts.values()), alarm_sites("_job_alarms"), which),
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
    for node in ast.walk(cdk("alarms")):
        if isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Tuple):
            rows = [ast.literal_eval(row) for row in node.iter.elts]
            return {key: {"construct": f"`{construct}`",
                          "watches": f"AWS/DynamoDB `{metric}` of the table (Sum)",
                          "when": ">= `1`"} for key, construct, metric in rows}
    return {}
