"""The trigger-state call sites that the crm-sync run does not reach, x every fault.

- ``dynamodb.undo_queued``: a QUEUE decision whose message could not be sent is taken
  back; WHEN the undo itself fails, THEN the trigger's redelivery still ends queued once
  and run once, and the queued count returns to 0 (END, bounds).
- ``dynamodb.repair``: ``jobguard release --force`` on a damaged lease row; WHEN the
  rewrite fails, THEN the command says so (or its own lost write counts) and, run again,
  the next tick runs with a fence above every fence issued (FENCE).
- ``dynamodb.read_trigger``: a read; its caller sees the error or the answer.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from jobguard import OverlapPolicy, hooks
from jobguard.callsites import Fault
from jobguard.faults import Faults, Rule
from jobguard.local.esm import deliver_once
from tests.scenarios._support import Recorder, make_job, tick
from tests.scenarios._trigger_support import cli_force_release

FAULTS = list(Fault)
SITES = ("dynamodb.undo_queued", "dynamodb.repair", "dynamodb.read_trigger",
         "dynamodb.put_run")


def _queued_n(aws: Any, job: str) -> int:
    item = aws.lease_item(job) or {}
    return int(item.get("queued_n", {}).get("N", 0))


def _undo_cell(aws: Any, clock: Any, fault: Fault) -> None:
    rec = Recorder()
    job = make_job(aws, clock, rec.handler(), policy=OverlapPolicy.QUEUE)
    url = aws.queues["crm-sync"]
    entered, go = threading.Event(), threading.Event()

    def hold(**ctx: Any) -> None:
        if ctx["fence"] == 1:
            entered.set()
            go.wait(20)

    t1, t2 = tick("crm-sync", clock.now()), tick("crm-sync", clock.now() + timedelta(seconds=1))
    with hooks.on("after_acquire", hold):
        holder = threading.Thread(target=job, args=(t1, None))
        holder.start()
        assert entered.wait(20)
        faults = Faults([Rule(Fault.THROTTLE, site="queue.send", nth=1),
                         Rule(fault, site="dynamodb.undo_queued", nth=1)],
                        seed=7, backoff_scale=0.001, clients=[aws.ddb, aws.sqs])
        with faults, pytest.raises(Exception):  # noqa: B017 - the sender sees an error
            job(t2, None)
        assert any(c.site == "dynamodb.undo_queued" for c in faults.injected)
        # the sender retries (Lambda's async retry)
        again = job(t2, None)
        assert again["decision"] in ("queued", "duplicate")
        go.set()
        holder.join(20)
    while deliver_once(aws.sqs, url, job, visibility_s=1):
        pass
    ran = [t for t, _ in rec.calls]
    assert ran.count(t2_id := f"crm-sync@{t2['scheduled_at']}") == 1, rec.calls
    records = [r for r in aws.runs("crm-sync") if r.trigger_id == t2_id]
    assert [r.status.value for r in records].count("queued") == 1, records
    assert _queued_n(aws, "crm-sync") == 0


def _repair_cell(aws: Any, clock: Any, fault: Fault) -> None:
    rec = Recorder()
    job = make_job(aws, clock, rec.handler())
    job(tick("crm-sync", clock.now()), None)
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": "JOB#crm-sync"},
                                                   "sk": {"S": "LEASE"}},
                        UpdateExpression="SET fence = :x", ExpressionAttributeValues={
                            ":x": {"S": "abc"}})
    faults = Faults([Rule(fault, site="dynamodb.repair", nth=1)], seed=7,
                    backoff_scale=0.001, clients=[aws.ddb])
    with faults:
        code, _, err = cli_force_release(aws, "crm-sync")
    assert any(c.site == "dynamodb.repair" for c in faults.injected)
    assert "Traceback" not in err
    if code != 0:
        assert cli_force_release(aws, "crm-sync")[0] == 0
    clock.advance(timedelta(minutes=1))
    job(tick("crm-sync", clock.now()), None)
    fences = [f for _, f in rec.calls]
    assert len(fences) == 2 and fences[1] > fences[0]


def _read_cell(aws: Any, clock: Any, fault: Fault) -> None:
    rec = Recorder()
    job = make_job(aws, clock, rec.handler())
    t = tick("crm-sync", clock.now())
    job(t, None)
    faults = Faults([Rule(fault, site="dynamodb.read_trigger", nth=1)], seed=7,
                    backoff_scale=0.001, clients=[aws.ddb])
    answer: Any = None
    with faults:
        try:
            answer = aws.store.read_trigger("crm-sync", f"crm-sync@{t['scheduled_at']}")
        except Exception:  # noqa: BLE001 - a read: the caller sees the error
            answer = None
    assert any(c.site == "dynamodb.read_trigger" for c in faults.injected)
    if fault is Fault.LOST:
        assert answer is not None and answer.state.value == "done"


def _put_run_cell(aws: Any, clock: Any, fault: Fault) -> None:
    # a duplicate delivery's record is the one decision written by a plain put
    rec = Recorder()
    job = make_job(aws, clock, rec.handler())
    t = tick("crm-sync", clock.now())
    job(t, None)
    faults = Faults([Rule(fault, site="dynamodb.put_run", nth=1)], seed=7,
                    backoff_scale=0.001, clients=[aws.ddb])
    with faults:
        try:
            answer = job(t, None)
        except Exception:  # noqa: BLE001 - the sender sees it and retries
            answer = job(t, None)
    assert any(c.site == "dynamodb.put_run" for c in faults.injected)
    assert answer["decision"] == "duplicate" and len(rec.calls) == 1
    duplicates = [r for r in aws.runs("crm-sync") if r.status.value == "duplicate"]
    assert len(duplicates) == 1


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
@pytest.mark.parametrize("site", SITES)
def test_cell(aws, clock, site: str, fault: Fault) -> None:
    {"dynamodb.undo_queued": _undo_cell, "dynamodb.repair": _repair_cell,
     "dynamodb.read_trigger": _read_cell, "dynamodb.put_run": _put_run_cell}[site](
        aws, clock, fault)
