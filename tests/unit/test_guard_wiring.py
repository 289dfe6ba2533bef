"""How a guarded handler is wired: the decorator's options, the owner, the trigger queue.

GIVEN a handler wrapped by ``guarded`` (or a ``GuardedJob``) on the in-process
emulator, WHEN a trigger runs it, THEN what the decorator was given reaches the job
(store, queue, clock, owner, policy), the lease row's owner names the Lambda function and
its log stream, and a release that finds a follow-up to send again gets the job's queue
however it was configured (a queue object, its URL in the config, or the environment).
These close the gaps ``make mutate`` found in ``jobguard.guard`` (docs/mutation.md):
the fast suites built every job by hand, with an explicit owner and queue.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run, guarded
from jobguard._clients import client
from jobguard.callsites import Fault
from jobguard.clock import to_ms
from jobguard.errors import SendError
from jobguard.faults import Faults, Rule
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import format_instant, parse_queue_message

JOB = "wired-job"
LEASE = timedelta(seconds=60)


def tick(clock: Any) -> dict[str, Any]:
    """A tick scheduled now, on the test's clock."""
    return {"job": JOB, "scheduled_at": format_instant(clock.now())}


def manual(name: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": name, "requested_by": "ops"}


def messages(aws: Any, url: str) -> list[Any]:
    got = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [parse_queue_message(m["Body"], job=JOB)[0] for m in got]


# -- the decorator -------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["options", "a JobConfig"])
def test_the_decorators_store_queue_clock_owner_and_policy_reach_the_job(aws, clock, form):
    """GIVEN ``@guarded`` given the job's options (policy ``"coalesce"`` in lower case) or
    a whole JobConfig, plus a store, a queue, a clock and an owner WHEN a tick runs the
    handler and a second tick arrives during the run THEN the handler ran with the given
    owner and clock on the given table (its run record says COALESCE, that owner, the
    clock's time), and the second tick was coalesced onto the given queue."""
    url = aws.fifo_queue(JOB)
    wiring = {"store": aws.store, "queue": TriggerQueue(url, client=aws.sqs), "clock": clock,
              "owner": "crm-fn/stream-1"}
    if form == "options":
        decorate = guarded(JOB, policy="coalesce", lease=LEASE, table_name=aws.table, **wiring)
    else:
        config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, lease=LEASE,
                           table_name=aws.table)
        decorate = guarded(config, **wiring)
    seen: dict[str, Any] = {}

    @decorate
    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        seen.update(owner=run.owner, clock=run.clock, lease_owner=aws.store.read_lease(JOB).owner)
        seen["second"] = lambda_handler(manual("second"), None)
        return "ran"

    assert lambda_handler(tick(clock), None) == "ran"

    assert seen["owner"] == seen["lease_owner"] == "crm-fn/stream-1"
    assert seen["clock"] is clock
    assert seen["second"]["decision"] == "coalesced"
    [ran] = [r for r in aws.runs(JOB) if r.decision.value == "ran"]
    assert (ran.policy, ran.owner, ran.started_at_ms) == (
        "COALESCE", "crm-fn/stream-1", to_ms(clock.now()))
    assert [t.kind.value for t in messages(aws, url)] == ["follow_up"]


def test_the_lease_owner_names_the_lambda_function_and_its_log_stream(aws, clock, monkeypatch):
    """GIVEN a guarded handler given no owner, running in Lambda (function ``crm-fn``, log
    stream ``2026/11/29/[$LATEST]abc``) WHEN it runs THEN the lease row and the run record
    name ``crm-fn/2026/11/29/[$LATEST]abc``: an operator finds the run's logs from it."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "crm-fn")
    monkeypatch.setenv("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/29/[$LATEST]abc")
    owners = run_once_without_owner(aws, clock)
    assert owners == ["crm-fn/2026/11/29/[$LATEST]abc"] * 2


def test_outside_lambda_the_owner_names_the_host_and_the_process(aws, clock, monkeypatch):
    """GIVEN a guarded handler given no owner, running outside Lambda (no function or log
    stream in the environment) WHEN it runs THEN the owner names this host and process."""
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("AWS_LAMBDA_LOG_STREAM_NAME", raising=False)
    owners = run_once_without_owner(aws, clock)
    assert owners == [f"{socket.gethostname()}/pid-{os.getpid()}"] * 2


def run_once_without_owner(aws: Any, clock: Any) -> list[str | None]:
    """The lease row's owner during the run, and the run record's."""
    during: list[str | None] = []

    @guarded(JOB, lease=LEASE, table_name=aws.table, store=aws.store, clock=clock)
    def lambda_handler(event: Any, context: Any) -> None:
        during.append(aws.store.read_lease(JOB).owner)

    lambda_handler(tick(clock), None)
    [record] = aws.runs(JOB)
    return [*during, record.owner]


# -- the queue a release uses ----------------------------------------------------------------

def throttle_first_send(*clients: Any) -> Faults:
    """The first SendMessage (the coalescing trigger's) is throttled on every attempt,
    from ``clients`` or any client jobguard builds from here on."""
    return Faults([Rule(Fault.THROTTLE, operation="SendMessage", nth=1)], backoff_scale=0.001,
                  clients=clients)


@pytest.mark.parametrize("configured", ["in the environment", "in the config"])
def test_a_holder_whose_container_never_built_the_queue_resends_the_follow_up(
        aws, clock, monkeypatch, configured):
    """GIVEN a COALESCE job whose queue URL is only ``configured`` (no queue object: each
    container builds it when a decision needs it), run R1 started by a tick in container
    A, and a second tick coalesced by container B, whose follow-up send was throttled
    WHEN R1 ends THEN A, which never needed the queue before, builds it and sends the
    follow-up again: it is on the queue."""
    url = aws.fifo_queue(JOB)
    options: dict[str, Any] = {"table_name": aws.table}
    if configured == "in the environment":
        monkeypatch.setenv("JOBGUARD_TRIGGER_QUEUE_URL", url)
    else:
        options["trigger_queue_url"] = url
    config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, lease=LEASE, **options)
    container_b = GuardedJob(config, lambda e, c: "b ran", store=aws.store, clock=clock)
    coalesced: list[BaseException] = []

    def handler(event: Any, context: Any) -> str:
        try:  # a tick delivered to container B while R1 runs
            container_b(manual("second"), None)
        except SendError as exc:
            coalesced.append(exc)
        return "a ran"

    container_a = GuardedJob(config, handler, store=aws.store, clock=clock)
    with throttle_first_send():
        assert container_a(tick(clock), None) == "a ran"

    assert len(coalesced) == 1, "the coalescing trigger's send was not the one throttled"
    assert [t.kind.value for t in messages(aws, url)] == ["follow_up"]


@pytest.mark.parametrize("given", ["its queue", "its queue's URL"])
def test_a_service_run_of_a_queued_job_given_its_queue_resends_the_follow_up(
        aws, clock, monkeypatch, given):
    """GIVEN the reconciler's sweep of a COALESCE job (a SKIP service run that serves no
    trigger) given ``given``, and a tick of the job coalesced while the sweep holds the
    lease, its follow-up send throttled WHEN the sweep ends THEN its release sends the
    follow-up again, as the job's own run would."""
    monkeypatch.delenv("JOBGUARD_TRIGGER_QUEUE_URL", raising=False)
    url = aws.fifo_queue(JOB)
    job_config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, lease=LEASE,
                           table_name=aws.table)
    sqs = client("sqs")  # the client a Lambda's guard builds: standard retries, 3 attempts
    job = GuardedJob(job_config, lambda e, c: "job ran", store=aws.store,
                     queue=TriggerQueue(url, client=sqs), clock=clock)
    wiring: dict[str, Any] = {}
    sweep_options: dict[str, Any] = {"table_name": aws.table}
    if given == "its queue":
        wiring["queue"] = TriggerQueue(url, client=sqs)
    else:
        sweep_options["trigger_queue_url"] = url
    coalesced: list[BaseException] = []

    def sweep(event: Any, context: Any) -> str:
        try:  # the job's tick, delivered while the sweep holds the lease
            job(manual("tick"), None)
        except SendError as exc:
            coalesced.append(exc)
        return "swept"

    reconciler = GuardedJob(JobConfig(name=JOB, policy=OverlapPolicy.SKIP, lease=LEASE,
                                      **sweep_options),
                            sweep, store=aws.store, clock=clock, serves_triggers=False,
                            **wiring)
    with throttle_first_send(sqs):
        assert reconciler(manual("sweep"), None) == "swept"

    assert len(coalesced) == 1
    assert [t.kind.value for t in messages(aws, url)] == ["follow_up"]

