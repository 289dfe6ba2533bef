"""A lost response on the lease write, the renewal, the claim, the completion and the
checkpoint: the worker recognises its own earlier write (owner + run id + fence; the job
row's token) and neither fails nor applies anything twice."""

from __future__ import annotations

from jobguard.callsites import Fault
from jobguard.faults import Rule

from ._scenario import N_ITEMS, run_scenario, work_ids


def _clean(out) -> None:  # noqa: ANN001
    assert out.invariants.violations == []
    assert out.r1 is not None and out.r1.status.value == "succeeded", out.r1
    assert "t1" not in out.errors
    # One acquisition: R0 had fence 1, R1 has 2 (a second acquisition would make it 3).
    assert out.r1.fence == 2
    assert out.r1.extra["completed"] == N_ITEMS - 1 and out.r1.extra["reconciled"] == 1
    assert out.r1.extra.get("superseded", 0) == 0 and out.r1.extra.get("held", 0) == 0


def _lost_at(site: str, nth: int = 1):  # noqa: ANN202
    out = run_scenario([Rule(Fault.LOST, site=site, nth=nth)])
    call = next(c for c in out.faults.injected if c.site == site)
    assert call.reached and call.attempts_hit == 1  # applied, then the SDK sent it again
    return out, call


def test_lost_response_on_the_lease_write_is_recognised_as_our_acquisition():
    out, _ = _lost_at("dynamodb.acquire")
    _clean(out)
    lease = out.lease_during  # read mid-run: our owner, run id and fence
    assert (lease.run_id, lease.fence) == (out.r1.run_id, 2)
    assert lease.owner == out.r1.owner
    # The run it displaced is still recorded (from prev_run_id), once.
    assert [r.status.value for r in out.runs].count("abandoned") == 1


def test_lost_response_on_the_renewal_keeps_the_lease():
    out, _ = _lost_at("dynamodb.renew")
    _clean(out)
    assert out.r1.detail is None  # not lease_lost


def test_lost_response_on_the_claim_is_our_claim():
    out, call = _lost_at("items.commit")  # the first page's claim (R0's dropped with it)
    assert "claim" in call.params["ExpressionAttributeNames"].values()
    _clean(out)
    rows = out.items_after_r1
    # Claimed once (attempts 1), completed by R1 under its fence: not refused as "held".
    for work_id in work_ids()[1:4]:
        assert rows[work_id].attempts == 1 and rows[work_id].run_id == out.r1.run_id
        assert rows[work_id].fence == 2


def test_lost_response_on_the_completion_is_our_completion():
    out, call = _lost_at("items.write_facts", nth=2)  # R0's note found, then page 1's
    assert "destination_id" in str(call.params["RequestItems"])
    _clean(out)
    for work_id in work_ids()[1:]:
        assert out.items_after_r1[work_id].state.value == "completed"


def test_lost_response_on_the_checkpoint_is_our_checkpoint():
    out, call = _lost_at("items.commit", nth=2)  # the checkpoint past page 1, claim of 2
    assert "cursor" in call.params["ExpressionAttributeNames"].values()
    _clean(out)
    # The checkpoint advanced once per page, never back, and ends past the last item.
    assert out.checkpoint_seqs == sorted(out.checkpoint_seqs)
    assert out.r1.extra["cursor_to"] == f"{N_ITEMS:06d}"


def test_lost_response_on_a_decision_records_it_once_not_as_a_duplicate():
    out, _ = _lost_at("dynamodb.record_decision")
    t2 = [r for r in out.runs if r.trigger_id.endswith(out.t2_id)]
    assert [r.decision.value for r in t2] == ["coalesced"], t2
    assert "t2" not in out.errors


def test_a_lost_claim_is_ours_though_the_refusal_carries_no_row(aws, clock):
    """GIVEN a backend that sends no row with a refused condition (ALL_OLD: some
    emulators never do) WHEN a page's claim lands but its answer is lost, and the retry
    is refused THEN the worker reads the job row back, finds its own token there and goes
    on: the run succeeds, each item once, nothing taken for a lost lease."""
    from datetime import timedelta
    from typing import Any

    from botocore.exceptions import ReadTimeoutError

    from jobguard import JobConfig
    from jobguard.schema import FENCE_SK
    from tests.scenarios._items import CrmSync, NotesTable, contacts

    notes = NotesTable.create(aws.ddb)
    job = CrmSync(JobConfig(name="crm-sync", table_name=aws.table, batch_size=3,
                            lease=timedelta(seconds=60)),
                  contacts(3), notes, store=aws.store, clock=clock)
    seen = {"row_write": False, "lost": 0, "stripped": 0}

    def which(params: dict[str, Any], **_: Any) -> None:
        seen["row_write"] = params.get("Key", {}).get("sk", {}).get("S") == FENCE_SK

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        if not seen["row_write"]:
            return
        if not seen["lost"]:
            seen["lost"] += 1
            raise ReadTimeoutError(endpoint_url="emulator")  # the claim landed
        if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            seen["stripped"] += 1
            parsed.pop("Item", None)  # the refusal, without the row

    events = aws.ddb.meta.events
    events.register_first("before-parameter-build.dynamodb.UpdateItem", which,
                          unique_id="which-row")
    events.register_first("after-call.dynamodb.UpdateItem", answer, unique_id="no-row")
    try:
        report = job.handler()({"job": "crm-sync", "manual": True, "trigger_id": "t"}, None)
    finally:
        events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="which-row")
        events.unregister("after-call.dynamodb.UpdateItem", unique_id="no-row")
    assert seen["lost"] == 1 and seen["stripped"] == 1
    assert report["completed"] == 3, report
    assert sorted(notes.calls) == sorted(notes.all())
    assert len(notes.calls) == 3
    [run] = aws.runs("crm-sync")
    assert run.status.value == "succeeded"
