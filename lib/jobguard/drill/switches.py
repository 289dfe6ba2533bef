"""Fault switches: how ``jobguard drill`` makes a deployed job misbehave on purpose.

A switch is a row in the job's own partition of the jobguard table (``JOB#<job>`` /
``DRILL#<name>``) that says *at this hook point, do this once*: ``pause`` (hold the
worker until the drill releases it; ``freeze`` also stops its heartbeat, like a
stopped process), ``crash`` (the process exits on the spot, like a restart), or
``fail`` (raise, like a destination that refused the call).

Switches are honoured only by a function whose environment has ``JOBGUARD_DRILLS=1``,
which only a deployment made with ``-c jobguard:drills=true`` sets; everywhere else
:func:`install` returns at once and no hook is registered. The library installs them
(:mod:`jobguard._drills`, when a guarded job is built): handlers carry no drill code,
and a production code asset does not contain this package at all.

Drill side: :func:`arm` a switch, trigger the job, :func:`wait_held` until a worker
took it (it names the run), do what the drill is about, then :func:`release`. A pause
never outlasts ``hold_s``: a drill that dies cannot wedge a worker.

Example:
    >>> arm(ddb, table, "crm-sync", "pause-first", point="after_claim", action="pause")
    ... # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from .. import environment, hooks
from ..schema import PARTITION_KEY, SORT_KEY, job_pk

__all__ = [
    "ACTIONS",
    "DRILLS",
    "POINTS",
    "DrillFault",
    "arm",
    "disarm",
    "disarm_all",
    "drills_enabled",
    "install",
    "read",
    "release",
    "wait_held",
]

DRILLS = environment.DRILLS
POINTS = ("after_acquire", "after_claim", "before_item", "before_destination",
          "after_process", "before_release")
ACTIONS = ("pause", "crash", "fail")
_PREFIX = "DRILL#"
_POLL_S = 0.2

_frozen: dict[str, threading.Event] = {}
"""Runs whose heartbeat is frozen, released by their event."""
_installed: set[str] = set()


class DrillFault(RuntimeError):
    """What a ``fail`` switch raises (a destination refusing the call)."""


drills_enabled = environment.drills


# -- the worker's side ---------------------------------------------------------------------


def install(job: str) -> bool:
    """Honour ``job``'s switches in this process, if drills are enabled. Idempotent."""
    if not drills_enabled() or job in _installed:
        return False
    _installed.add(job)
    for point in POINTS:
        hooks.add(point, _on_point(job, point))
    hooks.add("before_renew", _on_renew(job))
    return True


def _on_point(job: str, point: str) -> Any:
    def callback(**ctx: Any) -> None:
        if ctx.get("job") != job:
            return
        _trip(job, point, str(ctx.get("run_id") or ""), str(ctx.get("work_id") or ""))

    return callback


def _on_renew(job: str) -> Any:
    def callback(**ctx: Any) -> None:
        gate = _frozen.get(str(ctx.get("run_id")))
        if ctx.get("job") == job and gate is not None:
            gate.wait()

    return callback


def _client() -> Any:
    from .._clients import client

    return client("dynamodb")


def _trip(job: str, point: str, run_id: str, work_id: str) -> None:
    ddb, table = _client(), os.environ[environment.TABLE]
    rows = _rows(ddb, table, job)
    for row in rows:
        if row.get("point", {}).get("S") != point or row.get("state", {}).get("S") != "armed":
            continue
        match = row.get("match", {}).get("S", "")
        if match and match not in work_id:
            continue
        if _take(ddb, table, row, run_id, work_id):
            _act(ddb, table, row, run_id)
            return


def _rows(ddb: Any, table: str, job: str) -> list[dict[str, Any]]:
    """Every switch row of ``job`` (its partition, ``DRILL#`` prefix), every page."""
    kwargs: dict[str, Any] = {
        "TableName": table, "ConsistentRead": True,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
        "ExpressionAttributeValues": {":pk": {"S": job_pk(job)}, ":prefix": {"S": _PREFIX}}}
    items: list[dict[str, Any]] = []
    while True:
        page = ddb.query(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _take(ddb: Any, table: str, row: dict[str, Any], run_id: str, work_id: str) -> bool:
    """Count this pass; the pass after ``skip`` takes the switch (one worker only)."""
    key = {PARTITION_KEY: row[PARTITION_KEY], SORT_KEY: row[SORT_KEY]}
    seen = ddb.update_item(
        TableName=table, Key=key, UpdateExpression="ADD seen :one",
        ConditionExpression="#state = :armed",
        ExpressionAttributeNames={"#state": "state"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":armed": {"S": "armed"}},
        ReturnValues="UPDATED_NEW",
    )["Attributes"]["seen"]["N"]
    if int(seen) <= int(row.get("skip", {}).get("N", "0")):
        return False
    try:
        ddb.update_item(
            TableName=table, Key=key,
            UpdateExpression="SET #state = :held, held_by = :run, held_work = :work, "
                             "held_at = :now",
            ConditionExpression="#state = :armed",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":armed": {"S": "armed"}, ":held": {"S": "held"}, ":run": {"S": run_id},
                ":work": {"S": work_id}, ":now": {"N": str(int(time.time()))}},
        )
    except ddb.exceptions.ConditionalCheckFailedException:
        return False  # another worker took it first
    return True


def _act(ddb: Any, table: str, row: dict[str, Any], run_id: str) -> None:
    action = row["action"]["S"]
    if action == "crash":
        print(f"jobguard drill: switch {row[SORT_KEY]['S']} crashes run {run_id}", flush=True)
        os._exit(70)
    if action == "fail":
        raise DrillFault(f"drill switch {row[SORT_KEY]['S'][len(_PREFIX):]}: refused")
    gate = threading.Event()
    if row.get("freeze", {}).get("BOOL"):
        _frozen[run_id] = gate
    deadline = time.monotonic() + float(row.get("hold_s", {}).get("N", "60"))
    key = {PARTITION_KEY: row[PARTITION_KEY], SORT_KEY: row[SORT_KEY]}
    try:
        while time.monotonic() < deadline:
            state = ddb.get_item(TableName=table, Key=key, ConsistentRead=True
                                 ).get("Item", {}).get("state", {}).get("S")
            if state != "held":
                break
            time.sleep(_POLL_S)
    finally:
        _frozen.pop(run_id, None)
        gate.set()


# -- the drill's side ------------------------------------------------------------------------


def _key(job: str, name: str) -> dict[str, Any]:
    return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": _PREFIX + name}}


def arm(ddb: Any, table: str, job: str, name: str, *, point: str, action: str,
        match: str = "", skip: int = 0, freeze: bool = False, hold_s: int = 60) -> None:
    """Arm switch ``name`` of ``job``: the ``skip + 1``-th worker pass through ``point``
    (whose work id contains ``match``) does ``action``."""
    if point not in POINTS:
        raise ValueError(f"point: {point!r} is not one of {', '.join(POINTS)}")
    if action not in ACTIONS:
        raise ValueError(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    item = {**_key(job, name), "point": {"S": point}, "action": {"S": action},
            "state": {"S": "armed"}, "seen": {"N": "0"}, "skip": {"N": str(skip)},
            "freeze": {"BOOL": freeze}, "hold_s": {"N": str(hold_s)}}
    if match:
        item["match"] = {"S": match}
    ddb.put_item(TableName=table, Item=item)


def read(ddb: Any, table: str, job: str, name: str) -> dict[str, Any] | None:
    item = ddb.get_item(TableName=table, Key=_key(job, name), ConsistentRead=True).get("Item")
    if item is None:
        return None
    return {k: next(iter(v.values())) for k, v in item.items()}


def wait_held(ddb: Any, table: str, job: str, name: str, *, timeout_s: float = 60
              ) -> dict[str, Any]:
    """Wait until a worker took switch ``name``; returns the row (``held_by``: its run)."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = read(ddb, table, job, name)
        if row is not None and row.get("state") == "held":
            return row
        if time.monotonic() > deadline:
            raise TimeoutError(f"switch {name!r} of {job!r} was not taken in {timeout_s:.0f} s "
                               f"(row: {row})")
        time.sleep(_POLL_S)


def release(ddb: Any, table: str, job: str, name: str) -> None:
    """Let the held worker go on."""
    ddb.update_item(TableName=table, Key=_key(job, name),
                    UpdateExpression="SET #state = :released",
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={":released": {"S": "released"}})


def disarm(ddb: Any, table: str, job: str, name: str) -> None:
    ddb.delete_item(TableName=table, Key=_key(job, name))


def disarm_all(ddb: Any, table: str, job: str) -> int:
    """Release and delete every switch of ``job`` (after a drill, whatever happened)."""
    rows = _rows(ddb, table, job)
    for row in rows:
        ddb.delete_item(TableName=table, Key={PARTITION_KEY: row[PARTITION_KEY],
                                              SORT_KEY: row[SORT_KEY]})
    return len(rows)
