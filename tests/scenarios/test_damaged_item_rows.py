"""A row under a work item's key that is not a readable item (anyone who may write the
table can leave one: a hand edit, an old backup, another tool) stops no reader, and no
reader guesses what it says: taken for done, the work would be skipped; taken for
absent, it could be done twice. A run and a sweep leave it as it is and name it; a
recovery plan names it and replays it not; an operator's ``resolve`` replaces it.

Each test writes the damaged row with a raw ``PutItem`` on the in-process emulator and
checks the ledger, the destination and the run log.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from jobguard import JobConfig, current_run
from jobguard.batch import sweep
from jobguard.dynamodb_items import DynamoItemStore, shard_of
from jobguard.recovery import recover, resolve
from jobguard.schema import ITEM_SK, item_pk, unresolved_pk
from jobguard.workitems import DamagedItem, ItemState

from ._items import CrmSync, NotesTable, contacts
from ._support import make_job

JOB = "crm-sync"
DAMAGED = "contact-00001:create-note"
GOOD = ["contact-00000:create-note", "contact-00002:create-note"]

# taken for done, it would be skipped; taken for absent, redone
ROWS: dict[str, tuple[dict[str, Any], str]] = {
    "completed-but-attempts-a-map": (
        {"state": {"S": "completed"}, "destination_id": {"S": "note-?"}, "attempts": {"M": {}}},
        "attempts is a map, not a whole number"),
    "state-bogus": ({"state": {"S": "bogus"}},
                    "state 'bogus' is not an item state jobguard writes"),
}


def damage(aws: Any, attributes: dict[str, Any], *, indexed: bool = False) -> dict[str, Any]:
    """Write DAMAGED's row as anyone who may write the table could (``indexed``: in the
    sparse ``unresolved`` index, as a failed row is); return it as written."""
    item = {"pk": {"S": item_pk(JOB, DAMAGED)}, "sk": {"S": ITEM_SK},
            "work_id": {"S": DAMAGED}, **attributes}
    if indexed:
        item["unresolved_pk"] = {"S": unresolved_pk(JOB, f"{shard_of(DAMAGED):02d}")}
        item["unresolved_sk"] = {"S": f"failed#{DAMAGED}"}
    aws.ddb.put_item(TableName=aws.table, Item=item)
    return item


def raw(aws: Any) -> Any:
    return aws.ddb.get_item(TableName=aws.table, ConsistentRead=True, Key={
        "pk": {"S": item_pk(JOB, DAMAGED)}, "sk": {"S": ITEM_SK}}).get("Item")


def crm(aws: Any, clock: Any, notes: NotesTable) -> CrmSync:
    return CrmSync(JobConfig(name=JOB, table_name=aws.table, batch_size=10,
                             lease=timedelta(seconds=60)),
                   contacts(3), notes, store=aws.store, clock=clock)


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


@pytest.mark.parametrize("kind", list(ROWS))
def test_a_run_leaves_a_damaged_item_row_as_it_is_and_names_it(aws: Any, clock: Any,
                                                               kind: str, log_lines: Any) -> None:
    """GIVEN crm-sync's three contacts, the second one's ledger row damaged WHEN the job
    runs THEN the other two are done once; the damaged one is neither skipped as done
    nor sent again: no call for it, its row as it was, counted uncertain and named
    (key and problem) on the run record and in an error logged for the operator."""
    attributes, problem = ROWS[kind]
    notes = NotesTable.create(aws.ddb)
    written = damage(aws, attributes)

    crm(aws, clock, notes).handler()(manual("tick"), None)

    assert sorted(notes.calls) == GOOD  # ONCE, and nothing for the damaged item
    assert raw(aws) == written
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, [*GOOD, DAMAGED])
    assert {w: rows[w].state for w in GOOD} == dict.fromkeys(GOOD, ItemState.COMPLETED)
    damaged = rows[DAMAGED]
    assert isinstance(damaged, DamagedItem) and problem in damaged.problem
    [run] = aws.runs(JOB)
    assert run.extra["uncertain"] == 1 and run.extra["completed"] == 2
    assert run.status.value != "succeeded"
    assert run.extra["damaged_first"].startswith(f"{item_pk(JOB, DAMAGED)}: ")
    assert problem in run.extra["damaged_first"]
    [logged] = [json.loads(line) for line in log_lines.getvalue().splitlines()
                if '"item row damaged: left as it is"' in line]
    assert logged["level"] == "ERROR" and logged["work_id"] == DAMAGED
    assert problem in logged["problem"]


def test_a_sweep_leaves_a_damaged_item_row_as_it_is_and_counts_it(aws: Any, clock: Any) -> None:
    """GIVEN a damaged row in crm-sync's unresolved index (its state a map) WHEN a
    reconciler run sweeps the job THEN the sweep goes on, reconciles nothing for it,
    writes nothing over it, and counts it ``damaged``."""
    notes = NotesTable.create(aws.ddb)
    written = damage(aws, {"state": {"M": {"nested": {"S": "x"}}}}, indexed=True)
    asked: list[str] = []

    def reconcile(record: Any, row: Any) -> str | None:
        asked.append(row.work_id)
        return notes.find(row.work_id)

    report = make_job(aws, clock, lambda e, c: sweep(current_run(), reconcile).as_dict(),
                      name=JOB)(manual("sweep"), None)

    assert report["examined"] == 1 and report["damaged"] == 1
    assert report["found"] == report["not_found"] == report["still_uncertain"] == 0
    assert asked == [] and notes.calls == []
    assert raw(aws) == written
    [run] = aws.runs(JOB)
    assert run.extra["sweep_damaged"] == 1


def test_a_recovery_plan_names_a_damaged_item_row_and_never_replays_it(
        aws: Any, clock: Any) -> None:
    """GIVEN crm-sync's three contacts, none done yet, the second one's row damaged
    (``completed`` with attempts a map) WHEN an operator plans, then executes, the
    recovery of the range THEN the plan names it (key and problem) apart from the rest,
    the token covers it, and the execution replays the two others only: no call for
    it, its row as it was."""
    notes = NotesTable.create(aws.ddb)
    attributes, problem = ROWS["completed-but-attempts-a-map"]
    written = damage(aws, attributes)
    job = crm(aws, clock, notes)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "3", "mode": "unfinished"}

    plan = recover({**request, "dry_run": True}, job=job)["plan"]
    assert plan["damaged"] == 1 and plan["completed"] == 0
    assert plan["never_attempted"] == 2 and plan["to_replay"] == 2
    [named] = plan["damaged_sample"]
    assert named.startswith(f"{item_pk(JOB, DAMAGED)}: ") and problem in named

    answer = recover({**request, "dry_run": False, "requested_by": "alice",
                      "confirm": plan["token"]}, job=job)
    assert sorted(notes.calls) == GOOD
    assert raw(aws) == written
    assert answer["plan"]["damaged"] == 1


def test_an_operator_resolves_a_damaged_item_row(aws: Any, clock: Any) -> None:
    """GIVEN crm-sync's second contact's row damaged (state ``bogus``) and its note
    seen at the destination by an operator WHEN they resolve it found THEN its row is a
    readable completed item with that note's id, and the next run skips it as done
    (the note is never written twice)."""
    notes = NotesTable.create(aws.ddb)
    note_id = notes.put(DAMAGED, "email changed #1")
    damage(aws, ROWS["state-bogus"][0])
    job = crm(aws, clock, notes)

    answer = resolve(job.config, [DAMAGED], found=note_id, reason="seen in the CRM",
                     requested_by="alice", guard_options={"store": aws.store, "clock": clock})

    assert answer["result"] == "resolved", answer
    row = DynamoItemStore(aws.table, client=aws.ddb).get(JOB, DAMAGED)
    assert row is not None and not isinstance(row, DamagedItem)
    assert (row.state, row.destination_id) == (ItemState.COMPLETED, note_id)
    job.handler()(manual("tick"), None)
    assert sorted(notes.calls) == sorted([DAMAGED, *GOOD])  # one call each, ever



def test_the_checkpoint_stays_before_a_damaged_row_until_it_is_resolved(
        aws: Any, clock: Any) -> None:
    """GIVEN crm-sync's second contact's row damaged as a hand-edited completion is
    (``completed``, attempts a map: not in the ``unresolved`` index, as no completion
    is) WHEN the job runs twice THEN the checkpoint never goes past its page (nothing
    else would bring it back) and no run calls for it; WHEN an operator resolves it
    THEN the next run moves the checkpoint past it, still without a call for it."""
    notes = NotesTable.create(aws.ddb)
    note_id = notes.put(DAMAGED, "email changed #1")
    damage(aws, ROWS["completed-but-attempts-a-map"][0])
    job = crm(aws, clock, notes)
    store = DynamoItemStore(aws.table, client=aws.ddb)

    job.handler()(manual("tick-1"), None)
    job.handler()(manual("tick-2"), None)

    assert store.read_checkpoint(JOB).cursor is None
    assert sorted(notes.calls) == sorted([DAMAGED, *GOOD])  # the operator's note, once
    assert all(r.extra["uncertain"] == 1 for r in aws.runs(JOB))

    answer = resolve(job.config, [DAMAGED], found=note_id, reason="seen in the CRM",
                     requested_by="alice", guard_options={"store": aws.store, "clock": clock})
    assert answer["result"] == "resolved", answer
    job.handler()(manual("tick-3"), None)

    assert store.read_checkpoint(JOB).cursor is not None
    assert sorted(notes.calls) == sorted([DAMAGED, *GOOD])  # still one call each


def test_a_plan_over_a_damaged_row_is_not_confirmed_once_the_row_reads_uncertain(
        aws: Any, clock: Any) -> None:
    """GIVEN a recovery plan that names the second contact's row damaged (replayed not)
    WHEN someone rewrites the row by hand as a readable ``uncertain`` row (which a
    recovery replays), then the operator confirms the plan they read
    THEN the confirmation is refused naming ``confirm``: the plan changed under it, and
    nothing is called for an item the operator was told would not be replayed."""
    from jobguard.errors import InvalidRequestError

    notes = NotesTable.create(aws.ddb)
    damage(aws, ROWS["state-bogus"][0])
    job = crm(aws, clock, notes)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "3", "mode": "unfinished"}
    plan = recover({**request, "dry_run": True}, job=job, threshold=0)["plan"]
    assert plan["damaged"] == 1 and plan["to_replay"] == 2

    damage(aws, {"state": {"S": "uncertain"}, "attempts": {"N": "1"}})
    row = DynamoItemStore(aws.table, client=aws.ddb).get(JOB, DAMAGED)
    assert row is not None and not isinstance(row, DamagedItem)
    assert row.state is ItemState.UNCERTAIN
    with pytest.raises(InvalidRequestError) as refused:
        recover({**request, "dry_run": False, "requested_by": "alice",
                 "confirm": plan["token"]}, job=job, threshold=0)
    assert refused.value.field == "confirm"
    assert notes.calls == []
