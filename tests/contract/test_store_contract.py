"""The lease contract, run against every emulator the store is used with.

Each backend is a real DynamoDB API (moto in-process, moto over HTTP); the store is the
only code under test, and every assertion reads the row back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobguard.dynamodb import DynamoJobStore, create_table
from jobguard.lease import Acquired, Busy
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Release, Take
from jobguard.trigger_state import State
from jobguard.triggers import Trigger, TriggerKind

JOB = "contract-job"
LEASE_MS = 60_000
SKEW_MS = 5_000
T0 = 1_800_000_000_000


@pytest.fixture(params=["in_process", pytest.param("server", marks=pytest.mark.server)])
def store(request) -> Iterator[DynamoJobStore]:
    from jobguard.local.emulator import LocalAWS, in_process

    table = f"contract-{uuid.uuid4().hex[:8]}"
    if request.param == "in_process":
        with in_process() as emu:
            client = emu.client("dynamodb")
            create_table(client, table)
            yield DynamoJobStore(table, client=client)
    else:
        with LocalAWS() as emu:
            client = emu.client("dynamodb")
            create_table(client, table)
            yield DynamoJobStore(table, client=client)


def trigger(n: int) -> Trigger:
    return Trigger(JOB, f"{JOB}@manual:{n}", TriggerKind.MANUAL)


def acquire(store: DynamoJobStore, n: int, run_id: str, now_ms: int = T0) -> Acquired | Busy:
    return store.take(Take(trigger(n), run_id=run_id, owner=f"worker-{run_id}", now_ms=now_ms,
                           lease_ms=LEASE_MS, skew_ms=SKEW_MS))


def record(run_id: str, n: int, fence: int) -> RunRecord:
    return RunRecord(job=JOB, run_id=run_id, trigger_id=trigger(n).trigger_id,
                     trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                     status=RunStatus.SUCCEEDED, started_at_ms=T0, ended_at_ms=T0 + 1,
                     fence=fence)


def release(store: DynamoJobStore, run_id: str, n: int, fence: int):
    return store.release(Release(JOB, run_id=run_id, fence=fence, trigger_id=trigger(n).trigger_id,
                                 outcome=State.DONE, record=record(run_id, n, fence),
                                 record_ttl_s=T0 // 1000 + 86400, trigger_ttl_s=T0 // 1000 + 86400))


def count_requests(store: DynamoJobStore) -> list[str]:
    seen: list[str] = []
    store._client.meta.events.register(  # noqa: SLF001 - counting real sends
        "before-send.dynamodb", lambda request, **kw: seen.append(request.url)
    )
    return seen


def test_acquire_returns_the_new_fence_and_the_loser_learns_the_holder_in_one_call(store):
    first = acquire(store, 1, "R1")
    assert isinstance(first, Acquired) and first.fence == 1
    sent = count_requests(store)
    second = acquire(store, 2, "R2")
    assert isinstance(second, Busy)
    assert (second.state.run_id, second.state.fence, second.state.owner) == ("R1", 1, "worker-R1")
    assert len(sent) == 1  # no extra read


def test_fence_grows_by_one_per_acquisition_and_survives_release(store):
    fences = []
    for n in range(1, 4):
        result = acquire(store, n, f"R{n}")
        assert isinstance(result, Acquired)
        fences.append(result.fence)
        assert release(store, f"R{n}", n, result.fence).released
    assert fences == [1, 2, 3]
    lease = store.read_lease(JOB)
    assert lease.fence == 3 and lease.run_id is None


def test_expired_lease_is_taken_over_only_after_the_skew_margin(store):
    assert isinstance(acquire(store, 1, "R1"), Acquired)
    just_expired = T0 + LEASE_MS + 1
    assert isinstance(acquire(store, 2, "R2", now_ms=just_expired), Busy)
    after_margin = T0 + LEASE_MS + SKEW_MS + 1
    taken = acquire(store, 3, "R3", now_ms=after_margin)
    assert isinstance(taken, Acquired) and taken.fence == 2
    assert taken.displaced_run_id == "R1"  # the abandoned run, named by the takeover


def test_stale_holder_can_neither_renew_nor_release_a_newer_holders_lease(store):
    acquire(store, 1, "R1")
    taken = acquire(store, 2, "R2", now_ms=T0 + LEASE_MS + SKEW_MS + 1)
    assert isinstance(taken, Acquired)
    assert store.renew(JOB, run_id="R1", fence=1, now_ms=T0 + 70_000, lease_ms=LEASE_MS) is False
    stale = release(store, "R1", 1, 1)
    assert stale.released is False and stale.state is not None and stale.state.run_id == "R2"
    lease = store.read_lease(JOB)
    assert (lease.run_id, lease.fence) == ("R2", 2)
    assert store.get_run(JOB, "R1") is None  # the stale release wrote nothing


def test_a_renewal_never_recreates_a_released_or_missing_row(store):
    # a heartbeat racing a release: the release lands first
    acquired = acquire(store, 1, "R1")
    assert release(store, "R1", 1, acquired.fence).released
    assert store.renew(JOB, run_id="R1", fence=1, now_ms=T0 + 10, lease_ms=LEASE_MS) is False
    lease = store.read_lease(JOB)
    assert lease.run_id is None and lease.expires_at_ms is None and lease.fence == 1
    # and on a job that never had a row
    assert store.renew("other-job", run_id="X", fence=1, now_ms=T0, lease_ms=LEASE_MS) is False
    assert store.read_lease("other-job").fence == 0


def test_own_write_is_recognised_after_a_lost_response(store):
    # The SDK retries an acquisition whose response was lost: the retry fails against our
    # own write, and must be read as "acquired", with the same fence.
    first = acquire(store, 1, "R1")
    retry = acquire(store, 1, "R1")
    assert isinstance(retry, Acquired) and retry.fence == first.fence == 1
    assert release(store, "R1", 1, 1).released
    assert release(store, "R1", 1, 1).released  # the release retried: still ours


def test_a_duplicate_of_a_finished_trigger_cannot_acquire(store):
    acquire(store, 1, "R1")
    release(store, "R1", 1, 1)
    again = acquire(store, 1, "R2", now_ms=T0 + 10)
    assert isinstance(again, Busy)
    item = store.read_trigger(JOB, trigger(1).trigger_id)
    assert item is not None and item.state is State.DONE


def test_list_runs_reads_page_after_page_up_to_its_limit(store):
    """GIVEN 8 run records of 300 KB each (a long error each: a 1 MB page holds 3) WHEN
    the latest 6 are asked for THEN 6 come back, newest first (one page gave 3)."""
    from jobguard.ids import new_run_id

    ids = []
    for n in range(8):
        run_id = new_run_id(T0 + n)
        ids.append(run_id)
        store.put_run(RunRecord(**{**record(run_id, n, n + 1).__dict__,
                                   "status": RunStatus.FAILED, "error": "x" * 300_000}),
                      ttl_epoch_s=T0 // 1000 + 86_400)
    assert [r.run_id for r in store.list_runs(JOB, limit=6)] == ids[::-1][:6]
