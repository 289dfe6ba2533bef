"""Building blocks for scenario tests: a job whose handler can be held open."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import format_instant


@dataclass
class Gate:
    """Holds a handler inside its run until the test opens it."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    # Longer than any test's own timeout: a test on a loaded machine may take long to
    # open it, and a gate that opens by itself runs the held handler early, which the
    # test then reads as a protocol failure (a skip that ran). A test that never opens
    # it is stopped by its timeout; the held thread is a daemon.
    HOLD_S = 900

    def hold(self) -> None:
        self.entered.set()
        assert self.release.wait(self.HOLD_S), "test never opened the gate"


@dataclass
class Recorder:
    """What the handler saw: every run (trigger, fence), and the overlap high-water mark."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, gate_for: Callable[[str], Gate | None] | None = None) -> Callable[..., Any]:
        def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
            run = current_run()
            with self.lock:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
                self.calls.append((run.trigger.trigger_id, run.fence))
            try:
                gate = gate_for(run.trigger.trigger_id) if gate_for else None
                if gate is not None:
                    gate.hold()
                run.ensure_lease()
                return {"ran": run.trigger.trigger_id, "fence": run.fence}
            finally:
                with self.lock:
                    self.active -= 1

        return lambda_handler


def make_job(aws: Any, clock: Any, handler: Callable[..., Any], *, name: str = "crm-sync",
             policy: OverlapPolicy = OverlapPolicy.SKIP, **options: Any) -> GuardedJob:
    options.setdefault("lease", timedelta(seconds=60))
    config = JobConfig(name=name, policy=policy, table_name=aws.table, **options)
    queue = None
    if config.needs_queue:
        queue = TriggerQueue(aws.fifo_queue(name), client=aws.sqs)
    return GuardedJob(config, handler, store=aws.store, queue=queue, clock=clock)


def holding(gate: Gate, event: dict[str, Any]) -> Callable[[str], Gate | None]:
    """Hold only the run of ``event``'s tick behind ``gate``."""
    trigger_id = f"{event['job']}@{event['scheduled_at']}"
    return lambda t: gate if t == trigger_id else None


def tick(job: str, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"job": job, "scheduled_at": format_instant(at), **extra}


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box
