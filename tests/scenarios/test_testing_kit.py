"""The testing kit users get (``jobguard[testing]``): its fixtures come from the pytest
plugin, and each delivery helper does what AWS does, checked on the run log, the lease
row, the item ledger and the destination (not on the helper's own say-so)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobguard import OverlapPolicy, WorkId, current_run, guarded
from jobguard.destinations import DynamoDBDestination
from jobguard.testing import LambdaContext, ManualClock, Sandbox, WiredJob, tick_event

NOTES = "kit-notes"


def _sync(policy: OverlapPolicy) -> Any:
    @guarded("kit-sync", policy=policy, lease=timedelta(minutes=2))
    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        notes = DynamoDBDestination(NOTES, client=_ddb())
        for item in run.claim([f"contact-{n}" for n in range(3)],
                              work_id=lambda c: WorkId(c, "create-note"),
                              reconcile=lambda c, row: notes.reconcile(row.work_id)):
            with item:
                item.complete(destination_id=notes.put(item.key, {"contact": item.record}))
        return {"run_id": run.run_id, "fence": run.fence,
                **run.work_claims().report.as_dict()}

    return lambda_handler


def _ddb() -> Any:
    from jobguard import aws_client

    return aws_client("dynamodb")  # built like the handler's own: the sandbox catches it


@pytest.fixture
def notes(jobguard_sandbox: Sandbox) -> str:
    DynamoDBDestination.create_table(jobguard_sandbox.client("dynamodb"), NOTES)
    return NOTES


def _notes(sandbox: Sandbox) -> list[str]:
    items = sandbox.client("dynamodb").scan(TableName=NOTES)["Items"]
    return sorted(i["work_id"]["S"] for i in items)


def test_the_plugin_gives_the_fixtures(jobguard_sandbox, manual_clock, lambda_context) -> None:
    import os

    assert isinstance(manual_clock, ManualClock) and jobguard_sandbox.clock is manual_clock
    assert os.environ["JOBGUARD_TABLE"] == jobguard_sandbox.table
    before = lambda_context.get_remaining_time_in_millis()
    manual_clock.advance(timedelta(minutes=1))
    assert before - lambda_context.get_remaining_time_in_millis() == 60_000
    assert isinstance(lambda_context, LambdaContext) and lambda_context.aws_request_id


def test_a_tick_runs_once_and_its_duplicate_is_recorded(jobguard_sandbox, notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP))
    first = job.tick()
    again = job.tick()  # the same scheduled time: another delivery of the same tick
    assert first["completed"] == 3 and again["decision"] == "duplicate"
    assert sorted(job.decisions()) == ["duplicate", "ran"]
    assert _notes(jobguard_sandbox) == [f"contact-{n}:create-note" for n in range(3)]
    assert job.item("contact-0:create-note").state.value == "completed"


def test_concurrent_duplicates_run_once(jobguard_sandbox, notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP))
    answers = job.duplicates(times=4)
    ran = [a for a in answers if isinstance(a, dict) and "completed" in a]
    assert len(ran) == 1, answers
    assert sorted(job.decisions()) == ["duplicate"] * 3 + ["ran"]
    assert len(_notes(jobguard_sandbox)) == 3  # ONCE


def test_an_overlapping_tick_meets_the_held_lease(jobguard_sandbox, notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP))
    earlier = jobguard_sandbox.minute() - timedelta(minutes=1)
    with job.holding(earlier) as first:  # the previous minute's run, still going
        assert job.lease().run_id == first.run_id  # the lease is held right now
        second = job.tick()
    assert (second["decision"], second["holder_run_id"]) == ("skipped", first.run_id)
    assert first.error is None and first.result["completed"] == 3
    assert sorted(job.decisions()) == ["ran", "skipped"]
    assert job.lease().run_id is None  # released


def test_a_coalesced_tick_runs_once_from_the_queue_even_redelivered(jobguard_sandbox,
                                                                    notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.COALESCE))
    earlier = jobguard_sandbox.minute() - timedelta(minutes=1)
    with job.holding(earlier) as first:
        assert job.tick()["decision"] == "coalesced"
    assert job.queued() == 1  # the follow-up, sent by the first run's release
    assert job.deliver_queued(redeliver=True) == 1
    follow_ups = [r for r in job.runs() if r.trigger_kind == "follow_up"]
    assert sorted(r.decision.value for r in follow_ups) == ["duplicate", "ran"]
    (ran,) = [r for r in follow_ups if r.decision.value == "ran"]
    assert ran.fence == first.fence + 1
    assert job.queued() == 0 and len(_notes(jobguard_sandbox)) == 3


def test_a_frozen_run_is_taken_over_once_its_lease_expires(jobguard_sandbox, notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP))
    later = jobguard_sandbox.minute() + timedelta(minutes=3)
    with job.holding() as first:
        jobguard_sandbox.clock.advance(timedelta(minutes=3))  # past lease + skew margin
        second = job.tick(later)
        assert second["fence"] == first.fence + 1
    assert second["completed"] == 3
    # the held run woke to a lost lease: it wrote nothing more (FENCE), ended lease_lost
    assert first.error is not None or first.result.get("completed", 0) == 0
    assert sorted(r.status.value for r in job.runs()) == ["lease_lost", "succeeded"]
    assert len(_notes(jobguard_sandbox)) == 3  # ONCE


def test_wiring_leaves_the_modules_handler_alone_and_refuses_what_is_not_a_job(
        jobguard_sandbox) -> None:
    handler = _sync(OverlapPolicy.QUEUE)
    job = jobguard_sandbox.wire(handler)
    assert isinstance(job, WiredJob) and job.guarded is not handler and job.queue_url
    with pytest.raises(TypeError, match="@guarded handler"):
        jobguard_sandbox.wire(lambda event, context: None)
    with pytest.raises(ValueError, match="times"):
        job.duplicates(times=1)
    with pytest.raises(ValueError, match="no trigger queue"):
        jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP)).deliver_queued()
    with pytest.raises(TypeError, match="the class WiredJob: pass an instance"):
        jobguard_sandbox.wire(WiredJob)


def test_holding_a_tick_that_does_not_run_says_why(jobguard_sandbox, notes) -> None:
    job = jobguard_sandbox.wire(_sync(OverlapPolicy.SKIP))
    job.tick()
    with pytest.raises(AssertionError, match="did not run.*a duplicate"), job.holding():
        pass  # the same tick again: a duplicate, which never takes the lease


@pytest.mark.parametrize("bad", ["2026-11-29T07:35:00", 1700000000])
def test_bad_times_are_refused_naming_what(bad) -> None:
    from datetime import datetime

    with pytest.raises(ValueError, match="timezone"):
        tick_event("j", datetime.fromisoformat(bad) if isinstance(bad, str) else bad)
    with pytest.raises(TypeError, match="timezone"):
        ManualClock(datetime.fromisoformat(bad) if isinstance(bad, str) else bad)
    with pytest.raises(ValueError, match="never runs back"):
        ManualClock().advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="positive"):
        LambdaContext(timeout=timedelta(0))


@guarded("kit-direct", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
def direct_handler(event: Any, context: Any) -> dict[str, Any]:
    return {"run_id": current_run().run_id}


@pytest.mark.parametrize("test", ["first", "second"])
def test_a_modules_handler_called_directly_uses_each_tests_sandbox(
        jobguard_sandbox, lambda_context, test) -> None:
    # GIVEN a module-level handler (its store is built from the environment at its first
    # call, then kept) WHEN a second test calls it in a new sandbox THEN it writes there
    answer = direct_handler(tick_event("kit-direct", jobguard_sandbox.minute()),
                            lambda_context)
    (record,) = jobguard_sandbox.store.list_runs("kit-direct")
    assert record.run_id == answer["run_id"]


def test_outside_a_sandbox_no_request_leaves_the_machine() -> None:
    """The plugin sealed the session before this module was imported: fake credentials,
    and a request that no sandbox answers is refused before it is sent."""
    import os

    import boto3

    from jobguard._offline import RequestLeftTheMachine

    # GIVEN a client made outside any sandbox, for a real AWS endpoint
    client = boto3.client("dynamodb", region_name="eu-west-1")
    # WHEN it is called
    with pytest.raises(RequestLeftTheMachine, match=r"dynamodb\.eu-west-1\.amazonaws\.com"):
        client.list_tables()
    # THEN it was refused, and it could only have signed with the session's fake keys
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
    assert "AWS_PROFILE" not in os.environ


def test_release_asks_on_stderr_so_json_output_stays_parseable(
        jobguard_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``release`` asks before it frees a lease; the question goes to stderr, so what
    ``--output json`` prints on stdout is the answer alone."""
    import io
    import json

    from jobguard.cli import main

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    @guarded("kit-release", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
    def handler(event: Any, context: Any) -> dict[str, bool]:
        return {"ok": True}

    job = jobguard_sandbox.wire(handler)
    with job.holding() as held:
        # GIVEN a held lease, WHEN the operator answers "y" and asks for JSON
        monkeypatch.setattr("sys.stdin", Terminal("y\n"))
        capsys.readouterr()
        code = main(["release", "kit-release", "--force", "--reason", "hung", "--output",
                     "json", "--table", jobguard_sandbox.table])
        out, err = capsys.readouterr()
    # THEN stdout is one JSON answer, and the question was on stderr
    assert code == 0, err
    assert json.loads(out)["released"] is True
    assert "[y/N]" in err and "[y/N]" not in out
    assert held.run_id is not None and job.lease().run_id is None
