"""A guarded job's work-item store is built once per runtime, whoever asks first: two
threads claiming items at once (a handler's own threads) share one store, and one job's
build never waits behind another job's (the recovery function and a test serve several
jobs in one process).

``functools.cached_property`` got each wrong on one Python: from 3.12 (the Lambda runs
3.14) it has no lock and both threads build a store; up to 3.11 its lock is one for
every instance of the class, so one runtime's build held up every other's.
"""

from __future__ import annotations

import threading
from typing import Any

from jobguard.config import JobConfig, OverlapPolicy
from jobguard.dynamodb import DynamoJobStore
from jobguard.guard import _Runtime

WAIT_S = 5.0


class _Building(DynamoJobStore):
    """A real store whose client, read when the item store is built, says so and then
    waits for ``until`` (up to ``wait`` seconds): the build is in progress meanwhile."""

    def __init__(self, *, until: threading.Event, wait: float) -> None:
        super().__init__("jobguard", client=object())
        self.builds = 0
        self.released: bool | None = None  # until was set before the wait ran out
        self.arrived = threading.Event()
        self.until, self.wait = until, wait

    @property
    def client(self) -> Any:
        self.builds += 1
        self.arrived.set()
        self.released = self.until.wait(self.wait)
        return self._client


def _runtime(store: DynamoJobStore, name: str = "j") -> _Runtime:
    config = JobConfig(name=name, policy=OverlapPolicy.SKIP)
    return _Runtime(store=store, queue=None, telemetry=None, config=config)


def _together(*calls: Any) -> list[Any]:
    """Each call in its own thread, all released at once; their results."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(WAIT_S)
        results[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3 * WAIT_S)
    return results


def test_two_threads_claiming_at_once_share_one_item_store() -> None:
    never = threading.Event()  # the first build lingers: a second would overlap it
    store = _Building(until=never, wait=0.5)
    runtime = _runtime(store)
    first, second = _together(lambda: runtime.items, lambda: runtime.items)
    assert first is not None and first is second
    assert store.builds == 1


def test_one_jobs_build_does_not_wait_behind_anothers() -> None:
    other_built = threading.Event()
    slow = _Building(until=other_built, wait=WAIT_S)  # waits for the other's build
    quick = _Building(until=threading.Event(), wait=0)
    a, b = _runtime(slow, "a"), _runtime(quick, "b")

    def build_b() -> Any:
        slow.arrived.wait(WAIT_S)  # a's build is under way
        items = b.items
        other_built.set()
        return items

    items_a, items_b = _together(lambda: a.items, build_b)
    assert items_a is not None and items_b is not None and items_a is not items_b
    assert slow.released, "b's store was built only after a's build gave up waiting"
    assert quick.builds == 1
