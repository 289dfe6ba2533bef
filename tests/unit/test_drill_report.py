"""The drills' tally: what the demo's table says must follow from the run log and the
ledger it read back (the drills themselves run against MiniStack in tests/local)."""

from __future__ import annotations

from jobguard.drill.report import Check, DrillResult, JobTally, render_table, tally
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.workitems import ItemRecord, ItemState


def _run(run_id: str, decision: Decision, status: RunStatus, **extra: int) -> RunRecord:
    return RunRecord(job="crm-sync", run_id=run_id, trigger_id="t", trigger_kind="tick",
                     policy="COALESCE", decision=decision, status=status, started_at_ms=1,
                     extra=dict(extra))


def _item(work_id: str, state: ItemState) -> ItemRecord:
    return ItemRecord(job="crm-sync", work_id=work_id, state=state)


def test_a_takeover_counts_once_and_decisions_count_per_trigger() -> None:
    records = [
        # the dead run, recorded abandoned by the run that took over
        _run("R1", Decision.RAN, RunStatus.ABANDONED),
        _run("D1", Decision.DUPLICATE, RunStatus.DUPLICATE),
        _run("R2", Decision.RAN, RunStatus.SUCCEEDED, reconciled=4, completed=4),
        _run("C1", Decision.COALESCED, RunStatus.COALESCED),
    ]
    ledger = [_item("a", ItemState.COMPLETED), _item("b", ItemState.COMPLETED),
              _item("c", ItemState.FAILED), _item("d", ItemState.CLAIMED)]
    row = tally("crm-sync", records, ledger, duplicates=0)
    assert (row.triggers, row.runs, row.duplicate, row.coalesced) == (4, 2, 1, 1)
    assert row.takeovers == 1
    # a claim left by nobody is not done: it is counted with the uncertain
    assert (row.completed, row.failed, row.uncertain) == (2, 1, 1)
    # what runs reconciled, from their own records, counted once
    assert row.reconciled == 4


def test_a_run_whose_own_record_replaced_the_abandoned_one_is_one_trigger() -> None:
    # The frozen run woke and wrote lease_lost over the record the taker wrote for it.
    records = [_run("R1", Decision.RAN, RunStatus.ABANDONED),
               _run("R1", Decision.RAN, RunStatus.LEASE_LOST),
               _run("R2", Decision.RAN, RunStatus.SUCCEEDED)]
    row = tally("crm-sync", records, [])
    assert (row.triggers, row.runs, row.takeovers) == (2, 2, 1)


def test_a_drill_holds_only_with_checks_all_ok_no_error_and_no_destination_duplicate() -> None:
    result = DrillResult("lease-expiry", "x")
    assert not result.held  # a drill that checked nothing proves nothing
    result.check("runs", "taken over", True)
    result.tallies.append(JobTally("crm-sync"))
    assert result.held
    result.tallies.append(JobTally("report-export", duplicates_at_destination=1))
    assert not result.held
    result.tallies.pop()
    result.checks.append(Check("ledger", "every item completed", False))
    assert not result.held and result.as_dict()["verdict"] == "FAILED"


def test_the_table_names_every_drill_and_job_and_the_verdict() -> None:
    held = DrillResult("second-worker", "x")
    held.check("runs", "ok", True)
    held.tallies += [JobTally("crm-sync", triggers=3, runs=2, coalesced=1, completed=15)]
    failed = DrillResult("a-very-long-drill-name:overlap", "x", error="TimeoutError: x")
    failed.tallies += [JobTally("report-export")]
    lines = render_table([held, failed]).splitlines()
    assert max(len(line) for line in lines if "TimeoutError" not in line) <= 100
    assert lines[0].split()[:5] == ["drill", "/", "job", "trig", "runs"]
    assert lines[2].split() == ["second-worker", "held"]
    assert lines[3].split() == ["crm-sync", "3", "2", "0", "0", "1", "0", "0", "15", "0",
                                "0", "0", "0"]
    assert lines[4].split()[:2] == ["a-very-long-drill-name:overlap", "FAILED"]
    assert "TimeoutError" in lines[4] and lines[5].split()[0] == "report-export"
