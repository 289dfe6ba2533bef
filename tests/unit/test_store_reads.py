"""The store's reads and its heartbeat, against the in-process emulator (no server).

GIVEN rows written by the store (or by hand, for damage), WHEN the store reads them or a
run renews its lease, THEN every attribute comes back in its field, reads are strongly
consistent, fences are per job, and a renewal extends only the holder's lease, never
backwards. These close the gaps ``make mutate`` found in ``jobguard.dynamodb``
(docs/mutation.md): the fast suites only ever saw a renewal refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore, lease_state, trigger_record
from jobguard.errors import DamagedRowError, StoreError
from jobguard.lease import Acquired, LeaseState
from jobguard.requests import Take
from jobguard.trigger_state import Route, State, TriggerRecord
from jobguard.triggers import Trigger, TriggerKind

JOB = "reads-job"
T0 = 1_800_000_000_000
LEASE_MS = 60_000


class Recording:
    """A DynamoDB client that records each get_item request, then passes it on."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.gets: list[dict[str, Any]] = []

    def get_item(self, **kwargs: Any) -> Any:
        self.gets.append(kwargs)
        return self._client.get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def take(store: DynamoJobStore, n: int, run_id: str, now_ms: int = T0, job: str = JOB):
    result = store.take(Take(Trigger(job, f"{job}@manual:{n}", TriggerKind.MANUAL), run_id=run_id,
                             owner=f"worker-{run_id}", now_ms=now_ms, lease_ms=LEASE_MS,
                             skew_ms=5_000))
    assert isinstance(result, Acquired)
    return result


# -- renew: the heartbeat -----------------------------------------------------------------

def test_the_holders_renewal_extends_its_lease_and_records_the_heartbeat(aws):
    """GIVEN run R1 holds the lease (fence 1) until T0+60 s WHEN it renews at T0+30 s
    THEN the renewal succeeds, the lease expires at T0+90 s, the heartbeat is T0+30 s,
    and the holder and fence are unchanged."""
    take(aws.store, 1, "R1")
    assert aws.store.renew(JOB, run_id="R1", fence=1, now_ms=T0 + 30_000,
                           lease_ms=LEASE_MS) is True
    lease = aws.store.read_lease(JOB)
    assert (lease.run_id, lease.fence) == ("R1", 1)
    assert lease.expires_at_ms == T0 + 90_000
    assert lease.heartbeat_at_ms == T0 + 30_000


def test_a_renewal_from_a_clock_stepped_back_counts_but_never_moves_the_expiry_back(aws):
    """GIVEN R1 holds the lease until T0+60 s WHEN its wall clock stepped back and it
    renews at T0-10 s (asking for T0+50 s) THEN the renewal counts (the lease is still
    its own) and the expiry stays T0+60 s."""
    take(aws.store, 1, "R1")
    assert aws.store.renew(JOB, run_id="R1", fence=1, now_ms=T0 - 10_000,
                           lease_ms=LEASE_MS) is True
    assert aws.store.read_lease(JOB).expires_at_ms == T0 + LEASE_MS


def test_a_renewal_with_another_fence_is_refused_and_changes_nothing(aws):
    """GIVEN R1 holds the lease with fence 1 WHEN a renewal names R1 with fence 2 THEN it
    is refused and the expiry is unchanged."""
    take(aws.store, 1, "R1")
    assert aws.store.renew(JOB, run_id="R1", fence=2, now_ms=T0 + 30_000,
                           lease_ms=LEASE_MS) is False
    assert aws.store.read_lease(JOB).expires_at_ms == T0 + LEASE_MS


def test_a_renewal_the_backend_fails_is_a_store_error_naming_renew_and_the_job(aws):
    """GIVEN the store's table does not exist WHEN a run renews THEN a StoreError names
    the renew operation, the job and the backend's own message."""
    store = DynamoJobStore("no-such-table", client=aws.ddb)
    with pytest.raises(StoreError) as caught:
        store.renew(JOB, run_id="R1", fence=1, now_ms=T0, lease_ms=LEASE_MS)
    assert (caught.value.operation, caught.value.job) == ("renew", JOB)
    message = str(caught.value)
    assert message.startswith(f"renew for job {JOB!r}: ")
    assert "ResourceNotFoundException" in message


# -- the fence high-water mark and the expected lease ---------------------------------------

def test_the_fence_high_water_mark_is_per_job(aws):
    """GIVEN job A took the lease three times (fences 1, 2, 3) WHEN job B takes its lease
    for the first time THEN B's high-water mark was 0 and B gets fence 1; A's is 3."""
    assert aws.store.high_water(JOB) == 0
    for n in range(1, 4):
        take(aws.store, n, f"R{n}", now_ms=T0 + n * (LEASE_MS + 10_000))
    assert aws.store.high_water(JOB) == 3
    other = JOB + "-b"
    assert aws.store.high_water(other) == 0
    assert take(aws.store, 1, "B1", job=other).fence == 1
    assert aws.store.high_water(other) == 1


def test_the_expected_lease_is_read_once_then_taken_from_the_last_fence_seen(aws):
    """GIVEN a store that never read job J's row WHEN it asks for the expected lease THEN
    it reads the row (consistently, as J's); once it has seen fence 1 THEN it expects a
    free row with fence 1 without reading again."""
    client = Recording(aws.ddb)
    store = DynamoJobStore(aws.table, client=client)
    first = store.expected_lease(JOB)
    assert first == LeaseState(job=JOB, exists=False)
    assert [g["ConsistentRead"] for g in client.gets] == [True]
    take(store, 1, "R1")
    store.read_lease(JOB)
    before = len(client.gets)
    assert store.expected_lease(JOB) == LeaseState(job=JOB, fence=1)
    assert len(client.gets) == before


def test_the_store_reads_triggers_and_the_high_water_mark_consistently(aws):
    """GIVEN a job with a lease, a trigger item and a fence row WHEN the store reads the
    trigger and the high-water mark THEN each read is strongly consistent."""
    client = Recording(aws.ddb)
    store = DynamoJobStore(aws.table, client=client)
    take(store, 1, "R1")
    client.gets.clear()
    assert store.read_trigger(JOB, f"{JOB}@manual:1").state is State.RUNNING
    assert store.high_water(JOB) == 1
    assert [g["ConsistentRead"] for g in client.gets] == [True, True]


# -- reading items ------------------------------------------------------------------------

def item(**extra: dict[str, str]) -> dict[str, Any]:
    return {"pk": {"S": "JOB#j"}, "sk": {"S": "TRIGGER#j@t"}, **extra}


def test_a_trigger_item_reads_back_every_attribute():
    """GIVEN a trigger item with every attribute set WHEN it is read THEN each attribute
    is in its own field and the trigger id comes from the sort key."""
    full = item(state={"S": "coalesced"}, route={"S": "queue"}, run_id={"S": "R1"},
                fence={"N": "4"}, at_ms={"N": str(T0)}, ttl_epoch_s={"N": "1800003600"},
                gate_fence={"N": "3"}, into={"S": "j@follow-up:R1"},
                ended_by={"S": "release"})
    assert trigger_record("j", full) == TriggerRecord(
        trigger_id="j@t", state=State.COALESCED, route=Route.QUEUE, run_id="R1", fence=4,
        at_ms=T0, ttl_epoch_s=1_800_003_600, gate_fence=3, into="j@follow-up:R1",
        ended_by="release")


def test_a_trigger_item_without_optional_attributes_reads_zeros_and_nones():
    """GIVEN a trigger item with only its state and route WHEN it is read THEN its
    times are 0 and its run, fences, into and ended_by are None."""
    assert trigger_record("j", item(state={"S": "done"}, route={"S": "direct"})) == \
        TriggerRecord(trigger_id="j@t", state=State.DONE, route=Route.DIRECT)
    assert trigger_record("j", None) is None


def test_a_damaged_trigger_item_names_job_row_attribute_and_repair(aws):
    """GIVEN a trigger item that lost its state WHEN the store reads it THEN the error
    names the job, the item, the attribute, the problem and the command that forgets
    the trigger."""
    aws.ddb.put_item(TableName=aws.table, Item={
        "pk": {"S": f"JOB#{JOB}"}, "sk": {"S": f"TRIGGER#{JOB}@t"}, "route": {"S": "direct"}})
    with pytest.raises(DamagedRowError) as caught:
        aws.store.read_trigger(JOB, f"{JOB}@t")
    error = caught.value
    assert (error.job, error.row, error.attribute) == (JOB, f"TRIGGER#{JOB}@t", "state")
    assert error.repair == f"jobguard triggers {JOB} --forget {JOB}@t"
    assert f"state is missing or invalid; repair it with `{error.repair}`" in str(error)


def test_a_lease_item_is_read_as_its_jobs_lease():
    """GIVEN no lease item, then one at fence 2 WHEN each is read for job j THEN both are
    job j's lease: a new job, then an existing free row at fence 2."""
    assert lease_state("j", None) == LeaseState(job="j", exists=False)
    row = {"pk": {"S": "JOB#j"}, "sk": {"S": "LEASE"}, "fence": {"N": "2"}}
    assert lease_state("j", row) == LeaseState(job="j", fence=2)


# -- conditions on the trigger's item and read failures -----------------------------------

def test_a_trigger_item_past_its_ttl_counts_as_absent_before_ttl_deletes_it(aws):
    """GIVEN trigger 1's item ended (done) and expired an hour ago, not yet deleted by
    TTL WHEN trigger 1 is delivered again THEN the item counts as absent: the trigger
    takes the lease, and its item is running as the new run."""
    aws.ddb.put_item(TableName=aws.table, Item={
        "pk": {"S": f"JOB#{JOB}"}, "sk": {"S": f"TRIGGER#{JOB}@manual:1"},
        "state": {"S": "done"}, "route": {"S": "direct"}, "run_id": {"S": "R0"},
        "ttl_epoch_s": {"N": str((T0 - 3_600_000) // 1000)}})
    take(aws.store, 1, "R1")
    again = aws.store.read_trigger(JOB, f"{JOB}@manual:1")
    assert again is not None and (again.state, again.run_id) == (State.RUNNING, "R1")


def test_a_trigger_whose_run_died_is_taken_over_by_its_next_delivery(aws):
    """GIVEN trigger 1 running as R1, R1's lease expired by more than the skew margin
    WHEN trigger 1 is delivered again (run R2) THEN R2 takes the lease with fence 2 and
    the trigger's item now names R2 (the write was conditioned on the item naming R1)."""
    take(aws.store, 1, "R1")
    assert take(aws.store, 1, "R2", now_ms=T0 + LEASE_MS + 5_001).fence == 2
    item = aws.store.read_trigger(JOB, f"{JOB}@manual:1")
    assert item is not None and (item.state, item.run_id) == (State.RUNNING, "R2")


def test_a_lease_read_the_backend_fails_is_a_store_error_naming_read_lease_and_the_job(aws):
    """GIVEN the store's table does not exist WHEN the lease is read THEN a StoreError
    names the read_lease operation, the job and the backend's own message."""
    store = DynamoJobStore("no-such-table", client=aws.ddb)
    with pytest.raises(StoreError) as caught:
        store.read_lease(JOB)
    assert (caught.value.operation, caught.value.job) == ("read_lease", JOB)
    assert str(caught.value).startswith(f"read_lease for job {JOB!r}: ")
    assert "ResourceNotFoundException" in str(caught.value)
