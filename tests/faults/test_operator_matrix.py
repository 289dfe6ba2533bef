"""Every fault at every call site of the operator commands: the `jobguard` CLI (through
``main(argv)``, on the in-process emulator) and the store reads it builds on.

GIVEN a crm-sync job whose lease a stuck run still holds (one claimed item, one finished
run on the log, one trigger message queued); WHEN one command runs with one fault at one
site; THEN, as the site's declaration promises: ``surface-to-caller``: exit status 1, an
``error:`` line naming the failed AWS call, nothing on stdout, the table exactly as it
was; ``retry-within-deadline`` (a lost response, the SDK's resend refused by or equal to
its own write): exit status 0, the command's effect applied once. ``release --force``
cells also check FENCE (the stuck run can write nothing more); the recovery cells run a
real recovery (the emulator's Lambda runs the recovery code in-process) and check ONCE,
END and CKPT.
"""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import pytest

from jobguard import JobConfig, OverlapPolicy
from jobguard.callsites import Fault, Handling, all_sites
from jobguard.cli import main
from jobguard.destinations import DynamoDBDestination
from jobguard.dynamodb import DynamoJobStore
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import JobGuardError, LeaseLostError
from jobguard.faults import Faults, Rule
from jobguard.ids import new_run_id
from jobguard.local.emulator import in_process
from jobguard.local.load import (
    Invariants,
    NotesJob,
    World,
    check_invariants,
    contacts,
    puts_reached,
)
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import ForceRelease, Take
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Commit, Fence, ItemState, Unresolved, WorkId

SITES = {s.name: s for s in all_sites()}
JOB = "crm-sync"
CLAIMED = "contact-9:create-note"
FUNCTION = "jobguard-recovery"
N_ITEMS = 5

# The command that reaches each site first (the store reads not on the CLI: called as
# the CLI calls its store).
COMMANDS: dict[str, list[str]] = {
    "dynamodb.pause": ["pause", JOB, "--reason", "CRM maintenance"],
    "dynamodb.resume": ["resume", JOB],
    "dynamodb.force_release": ["release", JOB, "--force", "--yes"],
    "dynamodb.read_lease": ["status", JOB],
    "dynamodb.list_runs": ["runs", JOB],
    "dynamodb.get_run": ["run", "{done}", "--job", JOB],
    "dynamodb.runs_between": ["timeline", JOB, "--since", "1h"],
    "items.unresolved": ["items", JOB],
    "items.get_many": ["items", JOB],
    "cli.recover.invoke": ["recover", JOB, "--from", "000000", "--to", f"{N_ITEMS:06d}",
                           "--execute", "--function-name", FUNCTION],
    "cli.known_jobs.scan": ["status", "crm-synk"],
}
STORE_CALLS = ("queue.depth",)
OPERATOR_SITES = sorted([*COMMANDS, *STORE_CALLS])
FAULTS = list(Fault)


@dataclass
class Job:
    world: World
    store: DynamoJobStore
    items: DynamoItemStore
    queue: TriggerQueue
    stuck: RunRecord
    done: str
    notes_job: NotesJob

    def table(self) -> list[dict[str, Any]]:
        """Every row of the jobguard table, in key order (what "nothing written" compares)."""
        rows: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.world.table, "ConsistentRead": True}
        while True:
            page = self.world.ddb.scan(**kwargs)
            rows += page["Items"]
            if "LastEvaluatedKey" not in page:
                return sorted(rows, key=lambda r: (r["pk"]["S"], r["sk"]["S"]))
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _recovery_lambda(job: NotesJob, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator's Lambda runs no code: the recovery function's code runs in-process."""
    from moto.awslambda.models import LambdaFunction

    from jobguard.recovery import recover

    def run(_fn: Any, event: Any = None) -> tuple[str, bool, str]:
        answer: dict[str, Any] = {}

        def function() -> None:
            try:
                with redirect_stdout(io.StringIO()):  # its logs and metrics: CloudWatch's
                    answer.update(recover(event, job=job))
            except JobGuardError as exc:  # as lib/jobguard/functions/recovery.py answers
                answer.update(result="refused", field=getattr(exc, "field", None),
                              error=str(exc))

        # Its own thread, as a function runs apart from its caller (the fault harness
        # follows each thread's calls).
        worker = threading.Thread(target=function)
        worker.start()
        worker.join()
        return json.dumps(answer), False, ""

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", run)
    iam, lam = job_clients("iam"), job_clients("lambda")
    role = iam.create_role(RoleName="recovery", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("recovery.py", "def lambda_handler(event, context): pass\n")
    lam.create_function(FunctionName=FUNCTION, Runtime="python3.12", Role=role,
                        Handler="recovery.lambda_handler", Code={"ZipFile": code.getvalue()})


def job_clients(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().create_client(service)


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[Job]:
    with in_process():
        world = World.create()
        # The CLI's clients (boto3, from the environment): standard retries, so the
        # harness can shorten their backoff.
        monkeypatch.setenv("JOBGUARD_TABLE", world.table)
        monkeypatch.setenv("AWS_RETRY_MODE", "standard")
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
        store = DynamoJobStore(world.table, client=world.ddb)
        items = DynamoItemStore(world.table, client=world.ddb)
        queue = TriggerQueue(world.fifo_queue(JOB), client=world.sqs)
        now_ms = int(time.time() * 1000)
        # A finished run on the log, then a stuck run holding the lease with one claim.
        done = new_run_id(now_ms - 60_000)
        store.put_run(RunRecord(job=JOB, run_id=done, trigger_id=f"{JOB}@manual:done",
                                trigger_kind="manual", policy="COALESCE", decision=Decision.RAN,
                                status=RunStatus.SUCCEEDED, started_at_ms=now_ms - 60_000,
                                ended_at_ms=now_ms - 50_000), ttl_epoch_s=now_ms // 1000 + 86400)
        stuck_id = new_run_id(now_ms)
        acquired = store.take(Take(Trigger(JOB, f"{JOB}@manual:stuck", TriggerKind.MANUAL),
                                   run_id=stuck_id, owner="crm-sync/pid-1", now_ms=now_ms,
                                   lease_ms=3_600_000, skew_ms=5000))
        fence = getattr(acquired, "fence")  # noqa: B009 - Acquired, asserted below
        items.commit(Fence(JOB, stuck_id, fence), Commit(
            expected=items.read_row(JOB), claim={CLAIMED: ""},
            claim_expires_at_ms=now_ms + 3_600_000), now_ms=now_ms)
        queue.send(Trigger(JOB, f"{JOB}@manual:queued", TriggerKind.MANUAL), event={"job": JOB})
        stuck = RunRecord(job=JOB, run_id=stuck_id, trigger_id="", trigger_kind="manual",
                          policy="COALESCE", decision=Decision.RAN, status=RunStatus.RUNNING,
                          started_at_ms=now_ms, fence=fence)
        config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, table_name=world.table,
                           batch_size=4)
        notes_job = NotesJob(config, contacts(N_ITEMS),
                             DynamoDBDestination(world.notes_table, client=world.ddb),
                             store=store)
        yield Job(world, store, items, queue, stuck, done, notes_job)


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--json", *argv])
    return code, out.getvalue(), err.getvalue()


# What each fault leaves in the error line: the AWS answer, or the SDK's own failure.
SAID = {Fault.THROTTLE: ("Throttl", "TooManyRequests"),
        Fault.SERVER_ERROR: ("InternalServerError", "ServiceException", "InternalFailure"),
        Fault.TIMEOUT: ("Connect timeout",), Fault.LOST: ("Read timeout",)}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
@pytest.mark.parametrize("site", OPERATOR_SITES)
def test_cell(job: Job, site: str, fault: Fault, monkeypatch: pytest.MonkeyPatch) -> None:
    handling = SITES[site].on(fault)
    if site == "dynamodb.resume":
        job.store.pause(JOB, reason="before", now_ms=1)
    if site == "cli.recover.invoke":
        _recovery_lambda(job.notes_job, monkeypatch)
        # An operator recovers once the stuck run is released (recovery takes the lease).
        assert job.store.force_release(ForceRelease(JOB, holder_run_id=job.stuck.run_id,
                                                    fence=job.stuck.fence or 0, now_ms=1))
    before = job.table()
    faults = Faults([Rule(fault, site=site, nth=1)], seed=7, backoff_scale=0.001,
                    clients=[job.world.ddb, job.world.sqs])
    answer: Any = None
    error: BaseException | None = None
    with faults:
        if site in COMMANDS:
            argv = [a.format(done=job.done) for a in COMMANDS[site]]
            code, out, err = cli(argv)
        else:
            try:
                answer = job.queue.depth()
            except Exception as exc:  # noqa: BLE001 - what the caller gets
                error = exc
    # The fault landed where the cell says.
    assert any(c.site == site and c.fault is fault for c in faults.injected), faults.summary()
    after = job.table()

    if handling is Handling.SURFACE:
        if site in COMMANDS:
            # A clear error naming what failed, no traceback, no answer, nothing written
            # (or, a recovery whose answer was lost: said so, and applied at most once).
            assert code == 1, (code, out, err)
            assert err.splitlines()[-1].startswith("error: ") and "Traceback" not in err, err
            assert any(s in err for s in SAID[fault]), err
            assert out == "", out
            if site == "cli.recover.invoke" and fault is Fault.LOST:
                assert "may have run" in err and f"jobguard runs {JOB}" in err, err
                _recovered_once(job, faults)
                return
            if site == "cli.recover.invoke":  # the call, or the function's endpoint
                assert "Invoke" in err or f"functions/{FUNCTION}/" in err, err
        else:
            assert error is not None and any(s in str(error) for s in SAID[fault]), error
            assert answer is None
        assert after == before, "a failed operator call wrote something"
        return

    # Retried within the deadline: the SDK's resend succeeded, the effect applied once.
    assert handling is Handling.RETRY
    assert any(c.site == site and c.reached for c in faults.injected)
    if site in STORE_CALLS:
        assert error is None, error
        assert answer == 1
        assert after == before
        return
    if site == "cli.known_jobs.scan":
        # the scan answered after the resend: the typo is refused, naming the nearest
        assert code == 2 and "did you mean 'crm-sync'?" in err, (code, err)
        assert after == before
        return
    assert code == 0, err
    data = json.loads(out)
    lease = job.store.read_lease(JOB)
    if site == "dynamodb.pause":
        assert data["paused"] and lease.paused_reason == "CRM maintenance"
    elif site == "dynamodb.resume":
        assert data["paused"] is None and lease.paused_at_ms is None
    elif site == "dynamodb.force_release":
        # Released once: fence + 1 (not + 2), the stuck run named, and fenced out.
        assert data == {"job": JOB, "released": True, "old_run_id": job.stuck.run_id,
                        "fence": job.stuck.fence + 1}, data
        assert (lease.run_id, lease.fence, lease.last_run_id) == (
            None, (job.stuck.fence or 0) + 1, job.stuck.run_id)
        _fenced_out(job)
    else:
        assert after == before  # a read
        if site == "dynamodb.read_lease":
            assert data["holder_run_id"] == job.stuck.run_id
        elif site == "dynamodb.list_runs":
            assert [r["run_id"] for r in data] == [job.stuck.run_id, job.done]
        elif site == "dynamodb.get_run":
            assert data["run_id"] == job.done and data["status"] == "succeeded"
        elif site == "dynamodb.runs_between":
            (lane,) = data["jobs"]
            assert [(r["run_id"], r["status"]) for r in lane["runs"]] == [
                (job.done, "succeeded"), (job.stuck.run_id, "running")]
        else:
            assert [r["work_id"] for r in data] == [CLAIMED]


def _fenced_out(job: Job) -> None:
    """FENCE: the stuck run's claim, failure record, checkpoint and renewal with its old
    fence are refused."""
    lease = Fence(JOB, job.stuck.run_id, job.stuck.fence or 0)
    row = job.items.read_row(JOB)
    for change in (Commit(expected=row, claim={CLAIMED: "", "late:create-note": ""}),
                   Commit(expected=row, rows=(Unresolved(CLAIMED, ItemState.FAILED,
                                                         error="late"),)),
                   Commit(expected=row, claim={CLAIMED: ""}, checkpoint=(0, "1"))):
        with pytest.raises(LeaseLostError):
            job.items.commit(lease, change, now_ms=0)
    assert not job.store.renew(JOB, run_id=lease.run_id, fence=lease.fence, now_ms=0,
                               lease_ms=1000)
    assert job.items.get(JOB, "late:create-note") is None
    assert job.items.read_checkpoint(JOB).seq == 0


def _recovered_once(job: Job, faults: Faults) -> None:
    """The recovery whose answer was lost ran once: ONCE, END, CKPT over its range."""
    ids = [str(WorkId(r["id"], "create-note")) for r in contacts(N_ITEMS)]
    notes = job.world.notes()
    inv = check_invariants(job.world, JOB, ids, notes, puts_reached(faults), [],
                           found=Invariants())
    # The stuck run's own claim (outside the range) is still its own; a recovery replays
    # a range and never moves the job's checkpoint (CKPT: it stays where it was).
    assert [v for v in inv.violations
            if CLAIMED not in v and "final checkpoint None" not in v] == [], inv.violations
    assert {"ONCE", "END", "CKPT"} <= set(inv.checked)
    assert job.items.read_checkpoint(JOB).seq == 0
    assert sorted(notes) == ids
    recoveries = [r for r in job.store.list_runs(JOB) if r.trigger_kind == "recovery"]
    assert [r.status.value for r in recoveries] == ["succeeded"], recoveries
