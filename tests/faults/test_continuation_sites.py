"""The continuation's call sites, x every fault (issue 30).

- ``dynamodb.hand_off``: a link's release naming the next link. WHEN it fails, THEN the
  link is released or handed (its own lost write recognised), and the contacts are each
  done once by the chain, or by the tick that takes over once the hand-off expired.
- ``lambda.continue``: the asynchronous invoke of the job's own function. WHEN it fails,
  THEN the hand-off expires like a lease and the next tick takes over from the
  checkpoint; a repeated invoke (a lost answer) is a duplicate of the link. ONCE, END.

The emulator's Lambda runs no code: each invoke's event is kept and delivered by the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from datetime import timedelta
from typing import Any

import pytest

from jobguard import JobConfig, WorkId
from jobguard.callsites import Fault
from jobguard.continuation import LambdaContinuation
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.faults import Faults, Rule
from tests.scenarios._items import CrmSync, NotesTable, contacts
from tests.scenarios._support import tick

SITES = ("dynamodb.hand_off", "lambda.continue")
JOB = "crm-sync"
N = 10


class Budget:
    """Time for 4 destination calls (1 s each) above the 10 s time margin."""

    def __init__(self) -> None:
        self.remaining_ms = 10_000 + 4 * 1_000 - 1

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    def spend(self, _item: Any) -> None:
        self.remaining_ms -= 1_000


def _function(aws: Any, monkeypatch: pytest.MonkeyPatch, events: list[Any]) -> Any:
    from moto.awslambda.models import LambdaFunction

    def run(_fn: Any, event: Any = None) -> tuple[str, bool, str]:
        events.append(json.loads(event) if isinstance(event, str | bytes) else event)
        return "{}", False, ""

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", run)
    iam, lam = aws.sandbox.client("iam"), aws.sandbox.client("lambda")
    role = iam.create_role(RoleName="crm", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("h.py", "def h(event, context): pass\n")
    lam.create_function(FunctionName=JOB, Runtime="python3.12", Role=role, Handler="h.h",
                        Code={"ZipFile": code.getvalue()})
    return lam


@pytest.mark.parametrize("fault", list(Fault))
@pytest.mark.parametrize("site", SITES)
def test_cell(aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, site: str,
              fault: Fault) -> None:
    events: list[Any] = []
    lam = _function(aws, monkeypatch, events)
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=4,
                       lease=timedelta(seconds=60), max_chain=10)
    job = CrmSync(config, contacts(N), notes, store=aws.store, clock=clock,
                  continuation=LambdaContinuation(JOB, client=lam))
    handler = job.handler()

    def link(event: dict[str, Any]) -> Any:
        budget = Budget()
        job.before_call = budget.spend
        return handler(event, budget)

    faults = Faults([Rule(fault, site=site, nth=1)], seed=7, backoff_scale=0.001,
                    clients=[aws.ddb, lam])
    with faults, contextlib.suppress(Exception):  # a surfaced error: the sender retries
        link(tick(JOB, clock.now()))
    assert any(c.site == site for c in faults.injected), faults.summary()
    # every invoke that reached the function is delivered (a repeat is a duplicate)
    for _ in range(20):
        if not events:
            break
        event = events.pop(0)
        link(event)
        if fault is Fault.LOST and site == "lambda.continue":
            link(event)  # the same event again: a duplicate of the link
    # whatever the chain left, the tick after the hand-off's expiry takes over
    for _ in range(4):
        clock.advance(timedelta(seconds=70))
        link(tick(JOB, clock.now()))
        while events:
            link(events.pop(0))
    keys = [str(WorkId(f"contact-{i:05d}", "create-note")) for i in range(N)]
    assert sorted(notes.calls) == keys  # ONCE: every destination call once
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, keys)
    assert {r.state.value for r in rows.values()} == {"completed"} and len(rows) == N  # END
    assert "run_id" not in (aws.lease_item(JOB) or {})  # the lease free at the end


def test_an_invoke_refused_outright_is_told_apart_from_one_of_unknown_fate(
        aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4xx answer (here the emulator's 404 for a function that does not exist) says
    nothing was queued: ``ContinuationRefused``, and the link withdraws its hand-off. A
    5xx or no answer may have queued the event: a plain ``StoreError``, and the hand-off
    is left to expire, so that a queued continuation still runs its link."""
    from jobguard.errors import ContinuationRefused, StoreError

    lam = _function(aws, monkeypatch, [])
    with pytest.raises(ContinuationRefused, match="no-such-function|not found|Function"):
        LambdaContinuation("no-such-function", client=lam).send(
            {"job": JOB, "continues": "r", "link": 2})
    for fault in (Fault.SERVER_ERROR, Fault.TIMEOUT):
        faults = Faults([Rule(fault, site="lambda.continue", nth=n) for n in range(1, 9)],
                        seed=7, backoff_scale=0.001, clients=[lam])
        with faults, pytest.raises(StoreError) as raised:
            LambdaContinuation(JOB, client=lam).send({"job": JOB, "continues": "r",
                                                      "link": 2})
        assert not isinstance(raised.value, ContinuationRefused), fault


@pytest.mark.parametrize("fault", [None, *Fault])
def test_a_refused_invoke_withdraws_the_hand_off_and_a_failed_withdrawal_lets_it_expire(
        aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, fault: Fault | None) -> None:
    """GIVEN a function that cannot invoke its next link (its name is wrong: a 404)
    WHEN a link hands off THEN it withdraws the hand-off (``dynamodb.force_release``'s
    transaction) and a tick within the lease runs on from the checkpoint; WHEN that
    withdrawal fails THEN the run's outcome stands (nothing raised) and the hand-off
    expires like a lease instead. ONCE and END either way."""
    lam = _function(aws, monkeypatch, [])
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=4,
                       lease=timedelta(seconds=60), max_chain=10)
    job = CrmSync(config, contacts(N), notes, store=aws.store, clock=clock,
                  continuation=LambdaContinuation("no-such-function", client=lam))
    handler = job.handler()

    def link(event: dict[str, Any]) -> Any:
        budget = Budget()
        job.before_call = budget.spend
        return handler(event, budget)

    rules = [Rule(fault, site="dynamodb.force_release", nth=n) for n in range(1, 9)] \
        if fault is not None else []
    faults = Faults(rules, seed=7, backoff_scale=0.001, clients=[aws.ddb, lam])
    with faults:
        outcome = link(tick(JOB, clock.now()))  # never raises: the notes are written
    assert not (isinstance(outcome, dict) and outcome.get("jobguard")), outcome
    withdrawn = "handed_from" not in (aws.lease_item(JOB) or {})
    # a fault that loses only the answer still lands the withdrawal (read back: released)
    assert withdrawn is (fault in (None, Fault.LOST)), (fault, faults.summary())
    clock.advance(timedelta(seconds=30))
    second = link(tick(JOB, clock.now()))
    assert (isinstance(second, dict) and second.get("decision") == "skipped") is not withdrawn
    for _ in range(4):
        clock.advance(timedelta(seconds=70))
        link(tick(JOB, clock.now()))
    keys = [str(WorkId(f"contact-{i:05d}", "create-note")) for i in range(N)]
    assert sorted(notes.calls) == keys  # ONCE
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, keys)
    assert {r.state.value for r in rows.values()} == {"completed"} and len(rows) == N  # END
