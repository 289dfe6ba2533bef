"""The deterministic simulator: the real library, every AWS request a scheduling point.

Actors are threads running the real code: a :class:`jobguard.GuardedJob` (the handler of
a :class:`jobguard.BatchJob`, ``NotesJob`` from ``jobguard.local.load``) taking direct
deliveries and SQS event records, heartbeat renewals, recovery, the reconciler and the
operator's commands. Every DynamoDB request stops at a gate (a ``before-send`` hook on
the client the library uses; each SDK attempt is its own step) and every SQS call at
another (``before-call``: the explorer's :class:`~tests.explorer.fifo.FifoQueue` answers
it). Only one actor runs at a time; the scheduler picks which one steps next and what
happens to its request, from one :class:`~tests.explorer.choices.Chooser`.

The heartbeat thread is replaced (the explorer's one seam: ``Heartbeat.start`` /
``Heartbeat.stop`` patched from here) so that renewals are scheduler steps calling
``renew_once()``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from jobguard.requests import ForceRelease

from .choices import Chooser
from .fifo import FifoQueue, Message, SqsError
from .model import DIRECT_KINDS, Delivery, Invocation, Model, RecordWrite

JOB = "crm-sync"
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SKEW = timedelta(seconds=5)
TICK_EVERY = timedelta(minutes=1)
VISIBILITY_S = 120
MAX_RECEIVES = 6
MAX_CONTAINERS = 4
MAX_ACTORS = 7
FAR_FUTURE = datetime(2062, 1, 1, tzinfo=UTC)
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/crm-sync-triggers.fifo"
_UNROUTABLE = "http://explorer-answered.invalid/"
_PARK_TIMEOUT_S = 60.0

POLICIES = ("SKIP", "QUEUE", "COALESCE", "REPLACE")

# DynamoDB attempt faults; index 0 is "none"
DDB_FAULTS = ("ok", "throttle", "5xx", "timeout", "lost-before", "lost-after")
DDB_FAULT_WEIGHTS = (90, 2, 2, 1.5, 1.5, 3)
# SQS call faults (the outcome after the SDK's retries)
SQS_FAULTS = ("ok", "throttle", "5xx", "timeout", "lost-after")
SQS_FAULT_WEIGHTS = (88, 3, 3, 2, 4)

# every kind of event the scheduler can pick; index 0 is "step an actor"
EVENTS = ("step", "tick", "retick", "manual", "remanual", "sqs", "renew", "clock", "skew",
          "pause", "resume", "force", "recovery", "reconcile", "kill", "expire_visibility",
          "ttl", "work", "future_tick", "damage", "burst", "outage")
EVENT_WEIGHTS = {"step": 45, "tick": 6, "retick": 3, "manual": 4, "remanual": 2.5, "sqs": 9,
                 "renew": 6, "clock": 7, "skew": 1, "pause": 0.9, "resume": 0.6,
                 "force": 0.7, "recovery": 0.5, "reconcile": 0.5, "kill": 1.2,
                 "expire_visibility": 1.0, "ttl": 0.3, "work": 0.6, "future_tick": 0.6,
                 "damage": 0.12, "burst": 0.8, "outage": 0.8}
SWARM = (1.0, 0.0, 0.3, 3.0)
SWARM_WEIGHTS = (4, 1.5, 1.5, 2)
HANDLER_FAILURE = (0.08, 0.02, 0.25)
OUTAGES = (("dynamodb", "throttle"), ("dynamodb", "timeout"), ("dynamodb", "lost-after"),
           ("sqs", "5xx"), ("sqs", "timeout"), ("sqs", "lost-after"))
OUTAGE_LENGTHS = (2, 3, 4, 6, 9)
LAMBDA_TIMEOUT = timedelta(minutes=15)
MAX_EVENT_AGE = timedelta(hours=6)
"""Lambda's longest maximum event age: no retry of an asynchronous invoke comes later."""
"""The longest a Lambda invocation runs before Lambda stops it."""
CLOCK_STEPS = (timedelta(seconds=1), timedelta(seconds=7), timedelta(seconds=20),
               LEASE + SKEW + timedelta(seconds=1), timedelta(minutes=3),
               timedelta(hours=2, minutes=15), timedelta(hours=5))
CLOCK_WEIGHTS = (4, 3, 3, 2.5, 1.5, 1.2, 0.4)
SKEWS = (timedelta(0), timedelta(seconds=3), timedelta(seconds=-3), SKEW + timedelta(seconds=2),
         -(SKEW + timedelta(seconds=2)), timedelta(seconds=90), timedelta(seconds=-90))
DAMAGES = ("remove:expires_at_ms", "remove:fence", "string:fence", "string:expires_at_ms",
           "delete-row")


BIASES = ("", "wake", "late", "pause", "garbage", "strangers", "chain")
"""Scheduler biases (``--bias``), shapes of histories the uniform weights reach rarely.
They change weights only (a history's choice list replays with the same bias), but for
``garbage``, which adds an event (so its choice lists replay only with it):

- ``wake`` delivers queue messages while a run holds the lease and loses the responses
  of the holder's requests (its release above all), the shape of issue 14's #4 (a
  release whose response was lost forgets its wake receipt);
- ``late``: triggers come back hours later: the clock steps by hours far more often and
  redeliveries (ticks again, far-future ticks, manual retries, SQS, visibility ends)
  are frequent, so marks age between deliveries of one trigger;
- ``pause``: the operator pauses while triggers wait on the queue (a second trigger
  while the lease is held is frequent, pauses too once a message waits, resumes rare,
  hidden messages come back), so retries meet a paused job;
- ``garbage``: someone who is not jobguard sends messages that can never become a
  trigger to a QUEUE or COALESCE job's trigger queue, in its message group (not JSON,
  another job's message, another shape, a field that fails validation; at most
  ``MAX_GARBAGE``), so they wait ahead of queued triggers (issue 33);
- ``strangers`` changes no weight: the source also holds records no work id can be made
  for (issue 33), which must end rejected with the checkpoint past them.
- ``chain`` (issue 30): the job continues (``max_chain`` 4) and each invocation has time
  for two destination calls, so a run with records left hands the job to the next link;
  it adds an event (``continue``: deliver the oldest pending continuation, or delay,
  duplicate or lose it), so its choice lists replay only with it. What is still pending
  when faults stop is delivered (a failed delivery once more, as Lambda retries).
"""
CHAIN_MAX = 4
CHAIN_CALLS = 2
"""``chain``: destination calls an invocation has time for (each spends 1 s of a budget
just above the 10 s time margin)."""
CONTINUE_WEIGHT = 8.0
CONTINUE_ACTIONS = ("deliver", "delay", "duplicate", "lose")
CONTINUE_WEIGHTS = (6, 2, 1, 1)
# how a link's invoke of its function ends: queued; refused outright (a 4xx: the link
# withdraws its hand-off); queued by an attempt whose answer was lost, then refused by the
# SDK's retry (withdrawn, yet a continuation comes); no answer, queued or not (it expires)
INVOKE_ACTIONS = ("queue", "refuse", "queue-then-refuse", "unanswered-queued", "unanswered")
INVOKE_WEIGHTS = (3, 1, 1, 1, 1)
GARBAGE = (
    ("not-json", "{job: crm-sync, scheduled_at: 2026-03-02T08:00:00Z"),
    ("another-job", json.dumps({"event": None, "jobguard": 1, "job": "report-export",
                                "trigger_id": "report-export@2026-03-02T08:00:00Z",
                                "kind": "queued", "scheduled_at": "2026-03-02T08:00:00Z"})),
    ("another-shape", json.dumps({"Records": [{"eventSource": "aws:s3",
                                               "eventName": "ObjectCreated:Put"}]})),
    ("bad-field", json.dumps({"event": None, "jobguard": 1, "job": JOB,
                              "trigger_id": f"{JOB}@follow up", "kind": "queued"})),
)
"""Messages that are no trigger of the job: (shape, body)."""
GARBAGE_WEIGHT = 3.0
MAX_GARBAGE = 3
LATE_EVENTS = {"retick": 3.0, "remanual": 3.0, "future_tick": 4.0, "sqs": 1.5,
               "expire_visibility": 3.0, "clock": 1.5}
LATE_CLOCK_WEIGHTS = (4, 3, 3, 2.5, 1.5, 6, 3)
PAUSE_EVENTS = {"resume": 0.15, "expire_visibility": 3.0, "sqs": 2.0}
WAKE_EVENTS = {"pause": 0.1, "force": 0.2, "damage": 0.1, "kill": 0.3, "clock": 0.4,
               "outage": 0.3, "expire_visibility": 0.3, "burst": 0.3}
"""``wake``: fewer of the events that end a hold early (a message waits on a live run)."""


class Killed(BaseException):
    """Raised at a killed actor's gates: its process is gone."""


class Deadlock(RuntimeError):
    pass


class SkewClock:
    """One worker's wall clock: the shared clock plus an offset that can step."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return self.base.now() + self.offset

    def monotonic(self) -> float:
        return float(self.base.monotonic())


class Ctx:
    def __init__(self, request_id: str, calls: int | None = None) -> None:
        self.aws_request_id = request_id
        self.calls = calls
        """``chain``: destination calls left before the time margin (None: plenty)."""

    def get_remaining_time_in_millis(self) -> int:
        if self.calls is None:
            return 900_000
        return 10_000 + self.calls * 1_000 - 1


@dataclass
class Req:
    actor: Actor
    service: str
    op: str
    params: dict[str, Any]
    fault: str = "ok"
    status: int | None = None
    code: str | None = None
    run: tuple[str, int, str] | None = None  # run id, fence, trigger id of the caller


@dataclass
class Actor:
    n: int
    name: str
    kind: str
    fn: Any
    sim: Sim
    container: Container | None = None
    delivery: Delivery | None = None
    heartbeat: Any = None
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    pending: Req | None = None
    done: bool = False
    killed: bool = False
    result: Any = None
    exc: BaseException | None = None
    faults: int = 0
    run: tuple[str, int, str] | None = None
    thread: threading.Thread | None = None
    on_done: Any = None
    released: str | None = None
    """The run whose lease this actor's request freed."""
    request_faults: int = 0
    """Faults injected into this actor's own requests (not clock jumps and the like)."""
    born_ms: int = 0
    """When its invocation started (Lambda stops one after at most 15 minutes)."""
    excusing_faults: int = 0
    """Request faults that excuse a late wake-up: all but a DynamoDB response lost after
    the request was applied (the library's retry must then recover all it found), and
    only once a wake-up receipt is on the row."""

    def park(self, req: Req) -> None:
        """Called in the actor's thread at a gate: wait until the scheduler steps us."""
        if self.killed:
            raise Killed()
        self.pending = req
        self.sim._parked.release()
        self.go.acquire()
        self.pending = None
        if self.killed:
            raise Killed()

    def main(self) -> None:
        self.sim._local.actor = self
        try:
            self.result = self.fn()
        except Killed:
            self.killed = True
        except BaseException as exc:  # noqa: BLE001 - observed, classified by the model
            self.exc = exc
        finally:
            self.done = True
            self.sim._parked.release()


@dataclass
class Container:
    """One Lambda execution environment: its own GuardedJob, clock and owner."""

    n: int
    job: Any  # GuardedJob
    batch: Any  # the NotesJob
    clock: SkewClock
    busy: bool = False


def _plain(item: dict[str, Any] | None) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    if not item:
        return {}
    des = TypeDeserializer()
    out: dict[str, Any] = {}
    for k, v in item.items():
        value = des.deserialize(v)
        if hasattr(value, "as_integer_ratio") and not isinstance(value, (int, float)):
            value = int(value) if value == int(value) else float(value)
        out[k] = value
    return out


def item_size(item: dict[str, Any] | None) -> int:
    """DynamoDB's size of an item (names + values, approximately as billed)."""
    def size(v: dict[str, Any]) -> int:
        (t, x), = v.items()
        if t in ("S", "B"):
            return len(x.encode() if isinstance(x, str) else x)
        if t == "N":
            return len(str(x).lstrip("-").replace(".", "")) // 2 + 1
        if t in ("BOOL", "NULL"):
            return 1
        if t in ("SS", "NS", "BS"):
            return sum(len(str(e)) for e in x)
        if t == "L":
            return 3 + sum(size(e) + 1 for e in x)
        if t == "M":
            return 3 + sum(len(k.encode()) + size(e) + 1 for k, e in x.items())
        return 0
    return sum(len(k.encode()) + size(v) for k, v in (item or {}).items())


def _short(value: Any, n: int = 48) -> str:
    text = str(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _fmt_delta(ms: int) -> str:
    sign = "-" if ms < 0 else "+"
    s = abs(ms) // 1000
    return f"{sign}{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Result:
    seed: int | None
    policy: str
    choices: list[int]
    violations: list[tuple[str, str]]
    trace: list[str]
    steps: int
    requests: int
    coverage: set[tuple[str, str]]
    first_violation_step: int | None = None
    behind_garbage: int = 0
    """Deliveries of a trigger's message that had a message that is no trigger ahead of it
    in its FIFO group (bias ``garbage``): the shape issue 33's #12 needs."""

    @property
    def codes(self) -> set[str]:
        return {c for c, _ in self.violations}


class Sim:
    """One history: build the world, run the fault phase from the chooser, settle, check."""

    def __init__(self, chooser: Chooser, *, seed: int | None = None, policy: str | None = None,
                 trace: bool = True, bias: str = "", strangers: bool = False) -> None:
        self.chooser = chooser
        self.bias = bias
        self.strangers = strangers or bias == "strangers"
        """The source also holds records no work id can be made for (an id with a lone
        surrogate, a record without an id), added without a draw, so that a choice list
        replays the same history with or without them (issue 33)."""
        self.seed = seed
        # configuration is drawn too (so that a replayed list replays it)
        self.policy = policy or POLICIES[chooser.draw(len(POLICIES))]
        self.max_queued = 1 + chooser.draw(3)
        # swarm testing: each history weighs the event kinds its own way (some off)
        self.weights = {e: EVENT_WEIGHTS[e] * SWARM[chooser.draw(len(SWARM), SWARM_WEIGHTS)]
                        for e in EVENTS}
        self.weights["step"] = EVENT_WEIGHTS["step"]
        # (drawn after the configuration: a seed's policy and swarm are the same with it)
        self.events = EVENTS + (("garbage",) if bias == "garbage" else ()) + (
            ("continue",) if bias == "chain" else ())
        self.weights["garbage"] = GARBAGE_WEIGHT
        self.weights["continue"] = CONTINUE_WEIGHT
        self.mailbox: list[dict[str, Any]] = []
        """``chain``: continuation invokes sent and not yet delivered (or lost)."""
        self.continuation_events: dict[int, dict[str, Any]] = {}
        self.garbage: dict[int, str] = {}
        """Messages sent to the trigger queue that are no trigger, by sequence: shape."""
        self.behind_garbage = 0
        self.handler_failure = HANDLER_FAILURE[chooser.draw(len(HANDLER_FAILURE))]
        self.want_trace = trace
        self.trace: list[str] = []
        self.model = Model(policy=self.policy, skew_ms=int(SKEW.total_seconds() * 1000))
        self._local = threading.local()
        self._parked = threading.Semaphore(0)
        self.actors: list[Actor] = []
        self._actor_n = 0
        self.step = 0
        self.requests = 0
        self.coverage: set[tuple[str, str]] = set()
        self.heartbeats: dict[int, Any] = {}
        self.hb_run: dict[int, tuple[str, int, str]] = {}
        self.deliveries: list[Delivery] = self.model.deliveries
        self.ticks: list[datetime] = []
        self.manuals: list[str] = []
        self.manual_at: dict[str, Any] = {}
        self.dropped_by_lambda: set[str] = set()
        self.delivered_at: dict[int, Any] = {}
        """When each delivery was made (a tick's copy is an event of its own to Lambda)."""
        """Manual triggers a failed delivery of which was too old for Lambda to retry."""
        self.last_outcome: dict[str, str] = {}
        self.paused = False
        self.damaged: str | None = None
        self.row: dict[str, Any] = {}
        self.raw_row: dict[str, Any] | None = None
        self._ids = 0
        self._rand_bytes: Any = None
        self.first_violation_step: int | None = None
        self.source: list[dict[str, Any]] = []
        self.dlq_steps: dict[int, int] = {}
        self._internal: Exception | None = None
        self.outage: tuple[str, str, int] | None = None
        self.offsets_beyond_skew = False
        """A worker's clock was once off by more than the skew margin (the README's clock
        promise no longer holds for the rest of the history)."""

    # -- trace ---------------------------------------------------------------------------

    def log(self, text: str) -> None:
        if self.want_trace:
            ms = int((self.clock.now() - T0).total_seconds() * 1000)
            self.trace.append(f"#{self.step:04d} t={_fmt_delta(ms)} {text}")

    def _row_diff(self, before: dict[str, Any], after: dict[str, Any]) -> str:
        parts = []
        for k in sorted(set(before) | set(after)):
            if k in ("pk", "sk"):
                continue
            a, b = before.get(k), after.get(k)
            if a == b:
                continue
            if k not in before:
                parts.append(f"+{_short(k, 40)}={_short(b, 30)}")
            elif k not in after:
                parts.append(f"-{_short(k, 40)}")
            else:
                parts.append(f"{_short(k, 40)}:{_short(a, 30)}->{_short(b, 30)}")
        return ", ".join(parts)

    # -- the world -------------------------------------------------------------------------

    def run(self) -> Result:
        from jobguard.local.emulator import in_process
        from jobguard.testing import ManualClock

        self.clock = ManualClock(T0)
        with contextlib.ExitStack() as stack:
            stack.enter_context(in_process())
            self._build()
            stack.enter_context(self._patches())
            self.log(f"policy={self.policy} max_queued={self.max_queued} lease={LEASE} "
                     f"skew={SKEW}")
            try:
                while not self.chooser.exhausted:
                    self._step_random()
                self._settle()
            except Deadlock as exc:
                self.model.violate("LIVE/deadlock", f"the explorer deadlocked: {exc}")
            finally:
                self._abandon_all()
        return Result(self.seed, self.policy, list(self.chooser.record), self.model.violations,
                      self.trace, self.step, self.requests, self.coverage,
                      self.first_violation_step, self.behind_garbage)

    def _build(self) -> None:
        import botocore.session

        from jobguard import JobConfig, OverlapPolicy
        from jobguard._clients import config as client_config
        from jobguard.destinations import DynamoDBDestination
        from jobguard.dynamodb import DynamoJobStore, create_table
        from jobguard.dynamodb_items import DynamoItemStore
        from jobguard.triggerqueue import TriggerQueue

        session = botocore.session.get_session()
        self.observer = session.create_client("dynamodb", config=client_config())
        self.table = "jobguard-explorer"
        create_table(self.observer, self.table)
        # the store remembers the last fence it saw per (table, job) in the process: a
        # history must start as a cold process does, or the same seed sends other requests
        from jobguard import dynamodb as _store_module

        _store_module._fences.clear()  # noqa: SLF001
        self.notes_table = DynamoDBDestination.create_table(self.observer, "notes-explorer")
        self.ttl_attribute = self.observer.describe_time_to_live(TableName=self.table)[
            "TimeToLiveDescription"].get("AttributeName")
        self.items_view = DynamoItemStore(self.table, client=self.observer)
        # the clients the library uses: every request passes a gate
        self.ddb = session.create_client("dynamodb", config=client_config())
        self.ddb.meta.events.register_first("before-send.dynamodb", self._ddb_gate,
                                            unique_id="explorer-gate")
        self.sqs = session.create_client("sqs", config=client_config())
        self.sqs.meta.events.register_first("before-call.sqs", self._sqs_gate,
                                            unique_id="explorer-sqs")
        self.queue = FifoQueue(QUEUE_URL, visibility_s=VISIBILITY_S, max_receives=MAX_RECEIVES)
        self.store = DynamoJobStore(self.table, client=self.ddb)
        self.trigger_queue = TriggerQueue(QUEUE_URL, client=self.sqs)
        self.notes = DynamoDBDestination(self.notes_table, client=self.ddb)
        self.config = JobConfig(name=JOB, policy=OverlapPolicy(self.policy),
                                table_name=self.table, trigger_queue_url=QUEUE_URL,
                                batch_size=2, lease=LEASE, skew_margin=SKEW,
                                max_queued=self.max_queued,
                                max_chain=CHAIN_MAX if self.bias == "chain" else 1)
        # (``chain``: a backlog several invocations long)
        self.source = [{"id": f"c{i:03d}", "change": f"change {i}"}
                       for i in range(8 if self.bias == "chain" else 3)]
        if self.strangers:
            self.source[1:1] = [stranger(0)]
            self.source.append(stranger(1))
        self.containers: list[Container] = []

    @contextlib.contextmanager
    def _patches(self) -> Any:
        import random as _random

        from jobguard.run import Heartbeat

        sim = self
        rand = _random.Random(1234)
        original_stop = Heartbeat.stop

        def start(hb: Any) -> Any:
            sim.heartbeats[id(hb)] = hb
            return hb

        def stop(hb: Any) -> None:
            original_stop(hb)
            sim.heartbeats.pop(id(hb), None)

        def urandom(n: int) -> bytes:
            return rand.randbytes(n)

        from jobguard import observability

        # made before the levels are saved (making it sets the "jobguard" logger's level),
        # so that every later test logs exactly as before the history
        telemetry_logger = observability._logger()
        loggers = [logging.getLogger(n) for n in ("jobguard", "botocore", "aws_lambda_powertools")]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)

        from jobguard import hooks

        with mock.patch.object(Heartbeat, "start", start), \
                mock.patch.object(Heartbeat, "stop", stop), \
                hooks.on("holding", self._holding), \
                mock.patch.object(os, "urandom", urandom), \
                mock.patch.object(time, "sleep", lambda s: None), \
                mock.patch.object(observability.JobTelemetry, "flush", lambda self: None), \
                open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            telemetry_logger.setLevel(logging.CRITICAL)
            try:
                yield
            finally:
                for lg, lvl in zip(loggers, levels, strict=True):
                    lg.setLevel(lvl)

    def _container(self) -> Container | None:
        for c in self.containers:
            if not c.busy:
                return c
        if len(self.containers) >= MAX_CONTAINERS:
            return None
        from jobguard.local.load import NotesJob

        sim = self
        n = len(self.containers) + 1
        clock = SkewClock(self.clock)

        class ExplorerNotesJob(NotesJob):
            def run(self, run: Any, context: Any) -> Any:
                sim._invoked(run)
                if sim.chooser.chance(sim.handler_failure):
                    raise RuntimeError("injected handler failure (source unavailable)")
                sim._local.ctx = context
                report = super().run(run, context)
                return report

            def process(self, record: Any, item: Any) -> str:
                ctx = getattr(sim._local, "ctx", None)
                if ctx is not None and ctx.calls is not None:
                    ctx.calls -= 1  # (a call spends a second of the invocation)
                return str(super().process(record, item))

        chain = {"continuation": self} if self.bias == "chain" else {}
        batch = ExplorerNotesJob(self.config, self.source, self.notes, store=self.store,
                                 queue=self.trigger_queue, clock=clock, owner=f"fn/c{n}",
                                 **chain)
        job = batch.handler()
        original_handle = job.handle

        def handle(trigger: Any, event: Any, context: Any) -> Any:
            # observe each delivery's own outcome (on the SQS path: per record)
            d = sim._local.actor.delivery
            try:
                result = original_handle(trigger, event, context)
            except Exception as exc:
                if d is not None:
                    d.error = f"{type(exc).__name__}: {exc}"[:300]
                    d.outcome = "deferred" if type(exc).__name__ == "_Deferred" else "error"
                raise
            if d is not None:
                d.outcome, d.run_id = sim._classify(result, d)
            return result

        job.handle = handle
        c = Container(n, job, batch, clock)
        self.containers.append(c)
        return c

    def send(self, event: dict[str, Any]) -> None:
        """``chain``: the continuation port (an asynchronous invoke of the job's own
        function): the event waits in the mailbox for the ``continue`` event."""
        from jobguard.errors import ContinuationRefused

        action = INVOKE_ACTIONS[self.chooser.draw(len(INVOKE_ACTIONS), INVOKE_WEIGHTS)]
        self.coverage.add((self._row_state(), f"invoke:{action}"))
        self.log(f"{self._local.actor.name} invokes its function: continuation "
                 f"{event.get('continues', '')[-6:]} link {event.get('link')} ({action})")
        if action in ("queue", "queue-then-refuse", "unanswered-queued"):
            self.mailbox.append(dict(event))
        if action in ("refuse", "queue-then-refuse"):
            raise ContinuationRefused("continue", JOB, "TooManyRequestsException")
        if action.startswith("unanswered"):
            raise ConnectionError("the invoke was not answered")

    def _ev_continue(self) -> None:
        """Lambda delivers the oldest pending continuation, or it is delayed (stays),
        delivered twice, or lost."""
        action = CONTINUE_ACTIONS[self.chooser.draw(len(CONTINUE_ACTIONS), CONTINUE_WEIGHTS)]
        self.coverage.add((self._row_state(), f"continue:{action}"))
        if action == "delay":
            self.mailbox.append(self.mailbox.pop(0))
            return
        event = self.mailbox.pop(0)
        if action == "lose":
            self.log(f"ENV the continuation of {event['continues'][-6:]} is lost")
            return
        if action == "duplicate":
            self.mailbox.append(dict(event))
        self._deliver_continuation(event, "continue")

    def _deliver_continuation(self, event: dict[str, Any], label: str) -> Actor | None:
        from jobguard.triggers import continuation_trigger_id

        tid = continuation_trigger_id(JOB, event["continues"], event["link"])
        c = self._container()
        if c is None:
            self.mailbox.insert(0, event)  # no free environment: Lambda tries again later
            return None
        self.coverage.add((self._state_of(tid), f"deliver:{label}"))
        d = Delivery(len(self.deliveries) + 1, tid, "continuation", self.step)
        self.deliveries.append(d)
        self.delivered_at[d.n] = self.clock.now()
        self.continuation_events[d.n] = dict(event)
        rid = self._new_id()
        self.log(f"ENV deliver {label} {tid} -> c{c.n} (delivery #{d.n})")
        return self.spawn(f"{label}#{d.n}", "delivery",
                          lambda: c.job(dict(event), Ctx(rid, self._calls())), container=c,
                          delivery=d)

    def _calls(self) -> int | None:
        """``chain``: an invocation's time in destination calls (plenty once faults stop:
        what was handed on is then drained, and nothing more handed)."""
        return CHAIN_CALLS if self.bias == "chain" and not self.chooser.quiet else None

    def _settle_chains(self) -> None:
        """``chain``: Lambda delivers every pending continuation, and retries once each
        delivery of one that failed (an asynchronous invoke's retry)."""
        retried: set[int] = set()
        for _ in range(4 * CHAIN_MAX):
            for d in self.deliveries:
                if d.kind == "continuation" and d.n not in retried \
                        and d.outcome in (None, "error", "killed"):
                    retried.add(d.n)
                    self.mailbox.append(self.continuation_events[d.n])
            if not self.mailbox:
                return
            event = self.mailbox.pop(0)
            actor = self._deliver_continuation(event, "continue-settle")
            self._run_to_end(actor)
            self._drain_actors()

    # -- gates (run in actor threads) ----------------------------------------------------------

    def _current_run(self, actor: Actor) -> tuple[str, int, str] | None:
        from jobguard import current_run
        from jobguard.errors import JobGuardError

        if actor.heartbeat is not None:
            return self.hb_run.get(id(actor.heartbeat))
        try:
            run = current_run()
        except JobGuardError:
            return actor.run  # after its run: the release and record are still its run's
        info = (run.run_id, run.fence, run.trigger.trigger_id)
        self.hb_run[id(run.heartbeat)] = info
        actor.run = info
        return info

    def _ddb_gate(self, request: Any, event_name: str = "", **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError
        from moto.core.models import botocore_stubber

        actor: Actor | None = getattr(self._local, "actor", None)
        if actor is None:
            return None
        if actor.killed:
            raise Killed()
        target = request.headers.get("X-Amz-Target", b"")
        op = (target.decode() if isinstance(target, bytes) else str(target)).split(".")[-1]
        body = request.body
        params = json.loads(body.decode() if isinstance(body, bytes) else (body or "{}"))
        req = Req(actor, "dynamodb", op, params, run=self._current_run(actor))
        if op == "PutItem" and params.get("TableName") == self.notes_table \
                and req.run is not None:
            run_id, fence, _ = req.run
            work_id = str(params.get("Item", {}).get("work_id", {}).get("S", ""))
            self.model.destination_called(
                work_id, run_id, fence,
                excused=self.offsets_beyond_skew or self.damaged is not None)
        actor.park(req)
        url = request.url
        request.url = _UNROUTABLE  # moto's own before-send hook (after this one) skips it
        if req.fault in ("throttle", "5xx"):
            code, status = (("ThrottlingException", 400) if req.fault == "throttle"
                            else ("InternalServerError", 500))
            req.status, req.code = status, code
            self._answered(req)
            payload = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}",
                                  "message": "injected by the explorer"}).encode()
            return AWSResponse(_UNROUTABLE, status, {"x-amzn-ErrorType": code,
                                                     "Content-Type": "application/x-amz-json-1.0"},
                               _Raw(payload))
        if req.fault in ("timeout", "lost-before"):
            self._answered(req)
            if req.fault == "timeout":
                raise ConnectTimeoutError(endpoint_url=url)
            raise ReadTimeoutError(endpoint_url=url)
        request.url = url
        response = botocore_stubber(event_name, request)
        request.url = _UNROUTABLE
        req.status = response.status_code
        if req.status >= 300:
            try:
                req.code = str(json.loads(response.content).get("__type", "")).split("#")[-1]
            except ValueError:
                req.code = "?"
        else:
            self._applied(req)
        self._answered(req)
        if req.fault == "lost-after":
            raise ReadTimeoutError(endpoint_url=url)
        return response

    def _sqs_gate(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        actor: Actor | None = getattr(self._local, "actor", None)
        if actor is None or actor.killed:
            raise Killed()
        op = model.name
        body = params.get("body") or b"{}"
        api = json.loads(body.decode() if isinstance(body, bytes) else body)
        req = Req(actor, "sqs", op, api, run=self._current_run(actor))
        actor.park(req)
        if req.fault == "timeout":
            self._answered(req)
            raise ConnectTimeoutError(endpoint_url=QUEUE_URL)
        if req.fault in ("throttle", "5xx"):
            code, status = (("RequestThrottled", 400) if req.fault == "throttle"
                            else ("InternalFailure", 500))
            req.status, req.code = status, code
            self._answered(req)
            return (AWSResponse(QUEUE_URL, status, {}, _Raw(b"")),
                    {"Error": {"Code": code, "Message": "injected by the explorer"},
                     "ResponseMetadata": {"HTTPStatusCode": status}})
        try:
            parsed = self.queue.answer(op, api, self._now_ms())
        except SqsError as exc:
            req.status, req.code = exc.status, exc.code
            self._answered(req)
            return (AWSResponse(QUEUE_URL, exc.status, {}, _Raw(b"")),
                    {"Error": {"Code": exc.code, "Message": str(exc)},
                     "ResponseMetadata": {"HTTPStatusCode": exc.status}})
        req.status = 200
        self._answered(req)
        if req.fault == "lost-after":
            raise ReadTimeoutError(endpoint_url=QUEUE_URL)
        parsed["ResponseMetadata"] = {"HTTPStatusCode": 200}
        return (AWSResponse(QUEUE_URL, 200, {}, _Raw(b"")), parsed)

    def _applied(self, req: Req) -> None:
        """A DynamoDB request the table accepted (in the actor's thread, under the gate)."""
        p = req.params
        puts: list[dict[str, Any]] = []
        writes_lease_side = False
        if req.op == "PutItem":
            puts.append(p)
        elif req.op == "TransactWriteItems":
            for action in p.get("TransactItems", []):
                for kind, body in action.items():
                    if kind == "Put":
                        puts.append(body)
                    if body.get("TableName") == self.table and kind != "Put":
                        writes_lease_side = True
        elif req.op in ("UpdateItem", "DeleteItem") and p.get("TableName") == self.table:
            writes_lease_side = True
        for put in puts:
            item = _plain(put.get("Item"))
            if put.get("TableName") == self.notes_table and req.run is not None:
                self.model.destination_reached(str(item.get("work_id")), req.run[0],
                                               req.run[1])
            elif "decision" in item and "run_id" in item:
                rec = RecordWrite(self.step, str(item["run_id"]), str(item.get("trigger_id")),
                                  str(item["decision"]), str(item.get("status")),
                                  str(item.get("trigger_kind") or ""))
                self.model.record_written(rec)
        if writes_lease_side and req.run is not None:
            self.model.write_applied(run_id=req.run[0], fence=req.run[1],
                                     what=f"{req.op}", step=self.step)

    # -- scheduling (main thread) -------------------------------------------------------------

    def _wait_parked(self, actor: Actor) -> None:
        if not self._parked.acquire(timeout=_PARK_TIMEOUT_S):
            raise Deadlock(f"actor {actor.name} neither reached a gate nor ended")
        if self._internal is not None:
            error, self._internal = self._internal, None
            raise error
        if actor.done:
            self._finished(actor)

    def spawn(self, name: str, kind: str, fn: Any, *, container: Container | None = None,
              delivery: Delivery | None = None, heartbeat: Any = None,
              on_done: Any = None) -> Actor:
        self._actor_n += 1
        actor = Actor(self._actor_n, f"A{self._actor_n}:{name}", kind, fn, self,
                      container=container, delivery=delivery, heartbeat=heartbeat,
                      on_done=on_done, born_ms=self._now_ms())
        if container is not None:
            container.busy = True
        if delivery is not None:
            delivery.actor = actor.name
            delivery.damaged = self.damaged
            if container is not None and abs(container.clock.offset) > SKEW:
                # README ("Clocks"): nothing is promised to a worker whose clock is off by
                # more than the skew margin (its lease may be judged expired at once)
                delivery.faults += 1
            # a tick that is due may be ahead of a clock this far behind: refused, naming
            # scheduled_at, and retried as Lambda retries it
            delivery.clock_behind = container is not None and container.clock.offset < -SKEW
        self.actors.append(actor)
        actor.thread = threading.Thread(target=actor.main, name=actor.name, daemon=True)
        actor.thread.start()
        self._wait_parked(actor)
        return actor

    def _step_actor(self, actor: Actor, fault: str) -> None:
        req = actor.pending
        assert req is not None
        req.fault = fault
        if fault != "ok":
            actor.faults += 1
            actor.request_faults += 1
            # (a fault before any message asked the holder to wake it cannot make the
            # release forget one; the wake-up itself comes after the release)
            if not (fault == "lost-after" and req.service == "dynamodb") and (
                    self.row.get("wake_receipt") is not None or actor.released is not None):
                actor.excusing_faults += 1
            if actor.delivery is not None:
                actor.delivery.faults += 1
                actor.delivery.injected += 1
        self.requests += 1
        actor.go.release()
        self._wait_parked(actor)

    def _answered(self, req: Req) -> None:
        """In the actor's thread, once its request has its answer: trace and check."""
        self.step += 1
        try:
            self._after_request(req, self.row)
        except Exception as exc:  # noqa: BLE001 - the explorer's own failure
            self._internal = exc

    def _after_request(self, req: Req, before: dict[str, Any]) -> None:
        what = self._describe(req)
        outcome = req.fault if req.fault != "ok" else ""
        answer = f"{req.status}{' ' + req.code if req.code else ''}" if req.status else "-"
        row_text = ""
        if req.service == "dynamodb" and req.status == 200 and req.op in (
                "UpdateItem", "PutItem", "TransactWriteItems", "DeleteItem"):
            self._read_row()
            row_text = self._row_diff(before, self.row)
            container = req.actor.container
            offset_ms = (int(container.clock.offset.total_seconds() * 1000)
                         if container is not None else 0)
            self.model.lease_changed(before, self.row, step=self.step,
                                     true_now_ms=self._now_ms(), clock_offset_ms=offset_ms)
            if (abs(offset_ms) > SKEW.total_seconds() * 1000
                    and before.get("run_id") not in (None, self.row.get("run_id"))):
                # a takeover by a worker whose clock is off by more than the margin may
                # end a live run: outside the clock promise for every delivery it meets
                self._disrupt("skewed takeover")
            self.model.lease_size(item_size(self.raw_row), self.step)
            self.model.lease_names(self.row)
            if req.run is not None and self._writes_job_row(req):
                self._check_checkpoint()
            if (before.get("run_id") is not None and self.row.get("run_id") is None
                    and req.run is not None and before.get("run_id") == req.run[0]):
                req.actor.released = req.run[0]
        if req.service == "sqs" and req.op == "SendMessage" and req.status == 200:
            try:
                kind = json.loads(req.params.get("MessageBody", "{}")).get("kind")
            except ValueError:
                kind = None
            if kind == "follow_up":
                self.model.follow_up_sends.append(self.step)
        if req.service == "sqs" and req.op == "ChangeMessageVisibility" and req.status == 200 \
                and int(req.params.get("VisibilityTimeout", 0)) > 0:
            for m in self.queue.messages:
                if m.receipt == req.params.get("ReceiptHandle"):
                    m.deferred_on = self.row.get("run_id")
                    m.deferred_by = req.actor
        line = f"{req.actor.name} {what} -> {answer}"
        if outcome:
            line += f" [{outcome}]"
        if row_text:
            line += f" | row {row_text}"
        self.log(line)
        self._note_violations()

    def _writes_job_row(self, req: Req) -> bool:
        """The request wrote the job row (checkpoint, open claim): an ``UpdateItem`` of it,
        or a transaction with one."""
        p = req.params
        bodies = ([body for a in p.get("TransactItems", []) for body in a.values()]
                  if req.op == "TransactWriteItems" else [p] if req.op == "UpdateItem" else [])
        return any(b.get("TableName") == self.table
                   and (b.get("Key") or {}).get("sk", {}).get("S") == "FENCE" for b in bodies)

    def _describe(self, req: Req) -> str:
        p = req.params
        if req.service == "sqs":
            if req.op == "SendMessage":
                try:
                    body = json.loads(p.get("MessageBody", "{}"))
                except ValueError:
                    body = {}
                return f"sqs.SendMessage {body.get('kind')} {body.get('trigger_id')}"
            return f"sqs.{req.op}"

        def key(d: dict[str, Any]) -> str:
            k = d.get("Key") or d.get("Item") or {}
            sk = (k.get("sk") or {}).get("S") or ""
            pk = (k.get("pk") or {}).get("S") or (k.get("work_id") or {}).get("S") or ""
            if d.get("TableName") == self.notes_table:
                return f"notes:{pk}"
            if pk.startswith("ITEM#"):
                return f"item:{pk.split('#')[-1]}"
            return sk[:18] if sk else pk[:24]
        if req.op == "TransactWriteItems":
            acts = []
            for a in p.get("TransactItems", []):
                for kind, body in a.items():
                    acts.append(f"{kind}({key(body)})")
            return "ddb.Transact[" + " ".join(acts) + "]"
        if req.op in ("BatchWriteItem", "BatchGetItem"):
            entries = next(iter((p.get("RequestItems") or {}).values()), [])
            if req.op == "BatchGetItem":
                keys = [key({"Key": k}) for k in entries.get("Keys", [])]
            else:
                keys = [key(e.get("PutRequest") or e.get("DeleteRequest") or {})
                        for e in entries]
            return f"ddb.{req.op}[{' '.join(keys)}]"
        return f"ddb.{req.op}({key(p)})"

    def _note_violations(self) -> None:
        if self.model.violations and self.first_violation_step is None:
            self.first_violation_step = self.step
            for code, text in self.model.violations:
                self.log(f"!!! {code}: {text}")

    def _read_row(self) -> None:
        item = self.observer.get_item(TableName=self.table,
                                      Key={"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}},
                                      ConsistentRead=True).get("Item")
        self.raw_row = item
        try:
            self.row = _plain(item)
        except Exception:  # noqa: BLE001 - a damaged value still shows
            self.row = {k: str(v) for k, v in (item or {}).items()}

    def _check_checkpoint(self) -> None:
        from jobguard.workitems import ItemState

        cp = self.items_view.read_checkpoint(JOB)
        cursor = int(cp.cursor) if cp.cursor else -1
        if (cp.seq, cursor) == self.model.checkpoint:
            return
        ids = [key_of(r) for r in self.source[:max(cursor, 0)]]
        rows = self.items_view.get_many(JOB, ids) if ids else {}
        # a rejected record is finished once its row says so (it is never claimed)
        unfinished = [w for w in ids if w not in rows
                      or rows[w].state not in (ItemState.COMPLETED, ItemState.FAILED,
                                               ItemState.REJECTED)]
        self.model.checkpoint_moved(cp.seq, cursor, unfinished, self.step)

    def _check_ledger(self) -> None:
        """After the fresh tick (no faults): END, every item of the source completed or
        failed, none claimed or uncertain, no claim left open; ONCE, every completion's
        proof is the note the destination holds."""
        from jobguard.workitems import ItemState

        ids = [key_of(r) for r in self.source]
        rows = self.items_view.get_many(JOB, ids)
        for index, record in enumerate(self.source):
            if not is_stranger(record):
                continue
            row = rows.get(ids[index])
            if row is None or row.state is not ItemState.REJECTED:
                self.model.violate("END/rejected-unrecorded", f"after the fresh tick source "
                                   f"record {index} (no work id can be made for it) has no "
                                   "rejected row", key="rejected")
            checkpoint = self.items_view.read_checkpoint(JOB).cursor
            if checkpoint is None or int(checkpoint) <= index:
                self.model.violate("CKPT/stuck-at-rejected", f"after the fresh tick the "
                                   f"checkpoint ({checkpoint}) has not passed the rejected "
                                   f"record {index}", key="rejected")
        ids = [w for w, r in zip(ids, self.source, strict=True) if not is_stranger(r)]
        notes = {i["work_id"]["S"]: i["destination_id"]["S"]
                 for i in self.observer.scan(TableName=self.notes_table,
                                             ConsistentRead=True)["Items"]}
        for work_id in ids:
            row = rows.get(work_id)
            if row is None or row.state not in (ItemState.COMPLETED, ItemState.FAILED):
                self.model.violate("END/item-unfinished", f"after the fresh tick {work_id} is "
                                   f"{row.state.value if row else 'absent'}",
                                   key=row.state.value if row else "absent")
            elif row.state is ItemState.COMPLETED and notes.get(work_id) != row.destination_id:
                self.model.violate("ONCE/false-proof", f"{work_id} is completed with "
                                   f"{row.destination_id}, the destination holds "
                                   f"{notes.get(work_id)}")
        if self.items_view.read_row(JOB).claim is not None:
            self.model.violate("END/claim-left-open", "a claim is still open on the job row "
                               "after the fresh tick")

    def _finished(self, actor: Actor) -> None:
        if actor in self.actors:
            self.actors.remove(actor)
        if actor.container is not None:
            actor.container.busy = False
        d = actor.delivery
        if d is not None and d.outcome is None:
            if actor.killed:
                d.outcome = "killed"
            elif actor.exc is not None:
                d.outcome = "error"
                d.error = f"{type(actor.exc).__name__}: {actor.exc}"[:300]
            elif actor.kind != "sqs":  # the SQS path: its record's outcome, in on_done
                d.outcome, d.run_id = self._classify(actor.result, d)
        if actor.on_done is not None:
            actor.on_done(actor)
        if d is not None and d.outcome == "error" and d.error and "injected handler" in d.error:
            d.handler_failed = True
        if d is not None and d.outcome != "deferred":
            self.model.now_step = self.step
            self.model.delivery_ended(d)
        self._check_wakes(actor)
        summary = ("killed" if actor.killed else
                   f"raised {type(actor.exc).__name__}: {_short(actor.exc, 90)}"
                   if actor.exc is not None
                   else f"returned {_short(self._brief(actor.result), 90)}")
        self.log(f"{actor.name} ends: {summary}")

    def _check_wakes(self, actor: Actor) -> None:
        """A message deferred while run R held the lease is visible again once R's
        release has ended (the README: "the release wakes it"), unless a fault or a kill
        hit the deferral, or a fault the release's own delivery."""
        now = self._now_ms()
        for m in self.queue.messages:
            if m.deferred_by is actor and (actor.request_faults or (
                    actor.killed and self.row.get("wake_receipt") != m.receipt)):
                # (killed between hiding the message and asking the holder to wake it:
                # it stays hidden until the holder's lease would have ended; killed once
                # the row holds its receipt, the release still owes it the wake)
                m.excused = True
        if actor.released is None or actor.killed or actor.excusing_faults:
            return
        for m in self.queue.inflight(now):
            if (m.deferred_on == actor.released and not m.excused and m.visible_ms > now
                    and getattr(m.deferred_by, "done", False)):
                self.model.violate("LIVE/wake-lost", f"message {m.message_id} "
                                   f"({m.trigger_id()}) deferred on run {actor.released} is "
                                   f"still hidden for {(m.visible_ms - now) // 1000} s after "
                                   "that run released the lease")
                self._note_violations()

    @staticmethod
    def _brief(result: Any) -> str:
        if isinstance(result, dict):
            if "decision" in result:
                return f"{result['decision']} (run {result.get('run_id')})"
            if result.get("jobguard") == "lease_lost":
                return f"lease_lost (run {result.get('run_id')})"
            if "batchItemFailures" in result:
                return f"batchItemFailures={len(result['batchItemFailures'])}"
            if "selected" in result or "batch_size" in result:
                return f"ran (completed {result.get('completed', 0)})"
        return str(result)

    def _classify(self, result: Any, d: Delivery) -> tuple[str, str | None]:
        if isinstance(result, dict):
            if "decision" in result:
                return str(result["decision"]), result.get("run_id")
            if result.get("jobguard") == "lease_lost":
                return "lease_lost", result.get("run_id")
        return "ran", d.invoked[-1] if d.invoked else None

    def _invoked(self, run: Any) -> None:
        actor: Actor = self._local.actor
        self.step += 1
        inv = Invocation(run.run_id, run.trigger.trigger_id, run.trigger.kind.value, run.fence,
                         self.step, actor=actor.name, requested_by=run.trigger.requested_by)
        self.hb_run[id(run.heartbeat)] = (run.run_id, run.fence, run.trigger.trigger_id)
        actor.run = (run.run_id, run.fence, run.trigger.trigger_id)
        self.log(f"{actor.name} handler invoked: run {run.run_id[-6:]} fence {run.fence} "
                 f"trigger {run.trigger.trigger_id}")
        self.model.invoked(inv, actor.delivery)
        self._note_violations()

    def _abandon_all(self) -> None:
        for actor in list(self.actors):
            actor.killed = True
            actor.go.release()
            if actor.thread is not None:
                actor.thread.join(timeout=5)
        self.actors.clear()

    # -- time --------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self.clock.now().timestamp() * 1000)

    def _advance(self, delta: timedelta) -> None:
        self.clock.advance(delta)

    def _holding(self, job: str, run_id: str, until_ms: int) -> None:
        """A run waits for a displaced run's deadline (REPLACE) before it reconciles
        that run's items: time passes while it waits (at most 20 s a turn), and its
        heartbeat renews its lease meanwhile (a request like any other, faults and all)."""
        from jobguard import current_run
        from jobguard.clock import to_ms

        run = current_run()  # its own clock: the deadline is on it
        step_ms = min(max(until_ms - to_ms(run.clock.now()), 1), 20_000)
        self._advance(timedelta(milliseconds=step_ms))
        self.coverage.add((self._row_state(), "holding"))
        self.log(f"{self._local.actor.name} waits for the displaced run's deadline: "
                 f"+{step_ms} ms")
        run.heartbeat.renew_once()

    # -- events ---------------------------------------------------------------------------------

    def _gated(self) -> list[Actor]:
        return sorted((a for a in self.actors if a.pending is not None and not a.done),
                      key=lambda a: a.n)

    def _enabled(self) -> dict[str, bool]:
        room = len(self.actors) < MAX_ACTORS
        free = room and (any(not c.busy for c in self.containers)
                         or len(self.containers) < MAX_CONTAINERS)
        now = self._now_ms()
        return {
            "step": bool(self._gated()), "tick": free, "retick": free and bool(self.ticks),
            "manual": free, "remanual": free and bool(self.manuals),
            "sqs": free and self.queue.next_visible(now) is not None,
            "renew": room and bool(self._renewable()), "clock": True, "skew": bool(self.containers),
            "pause": room, "resume": room, "force": room, "recovery": free, "reconcile": free,
            "kill": bool(self._gated()), "expire_visibility": bool(self.queue.inflight(now)),
            "ttl": True, "work": True, "future_tick": free, "damage": True,
            "burst": free, "outage": self.outage is None,
            "garbage": self.policy in ("QUEUE", "COALESCE")
            and len(self.garbage) < MAX_GARBAGE,
            "continue": free and bool(self.mailbox),
        }

    def _renewable(self) -> list[Any]:
        busy = {id(a.heartbeat) for a in self.actors if a.heartbeat is not None}
        return [hb for key, hb in sorted(self.heartbeats.items(), key=lambda kv: kv[0])
                if key not in busy and hb.lost_reason is None]

    def _step_random(self) -> None:
        enabled = self._enabled()
        weights = [self.weights[e] if enabled[e] else 0.0 for e in self.events]
        if self.bias == "wake" and self.row.get("run_id") is not None:
            if enabled["sqs"]:
                weights[EVENTS.index("sqs")] = max(weights[EVENTS.index("sqs")], 9.0) * 4
            else:  # a trigger to queue behind the holder, so that a message waits on it
                for e in ("tick", "manual"):
                    weights[EVENTS.index(e)] *= 3
        shape = {"late": LATE_EVENTS, "pause": PAUSE_EVENTS, "wake": WAKE_EVENTS}.get(
            self.bias, {})
        for e, factor in shape.items():
            weights[EVENTS.index(e)] *= factor
        if self.bias == "pause":
            waiting = bool(self.queue.live())
            paused = self.row.get("paused_at_ms") is not None
            weights[EVENTS.index("pause")] *= 0.1 if paused else 6.0 if waiting else 0.2
            if self.row.get("run_id") is not None:
                weights[EVENTS.index("manual")] *= 3.0
            if paused:  # what waits comes back meanwhile
                weights[EVENTS.index("expire_visibility")] *= 3.0
                weights[EVENTS.index("sqs")] *= 2.0
        if not any(weights):
            weights = [1.0 if enabled[e] else 0.0 for e in self.events]
        event = self.events[self.chooser.draw(len(self.events), weights)]
        if not enabled[event]:
            return
        if event != "step":
            self.step += 1
        getattr(self, f"_ev_{event}")()

    def _ev_step(self) -> None:
        gated = self._gated()
        actor = gated[self.chooser.draw(len(gated), self._step_weights(gated))]
        req = actor.pending
        assert req is not None
        if self.outage is not None and self.outage[0] == req.service:
            service, fault, left = self.outage
            self.outage = (service, fault, left - 1) if left > 1 else None
        elif req.service == "dynamodb":
            weights = DDB_FAULT_WEIGHTS
            if self.bias == "wake" and actor.run is not None \
                    and self.row.get("run_id") == actor.run[0]:
                weights = (60, 1, 1, 1, 1, 36)  # the holder's responses lost
                receipt = self.row.get("wake_receipt")
                if receipt is not None and req.op == "TransactWriteItems":
                    # its release: the attempt that will land (it carries the receipt it
                    # learnt) loses its answer; the one that learns it is answered
                    weights = ((20, 0, 0, 0, 0, 80) if str(receipt) in str(req.params)
                               else (100, 0, 0, 0, 0, 0))
            fault = DDB_FAULTS[self.chooser.draw(len(DDB_FAULTS), weights)]
        else:
            fault = SQS_FAULTS[self.chooser.draw(len(SQS_FAULTS), SQS_FAULT_WEIGHTS)]
        self._step_actor(actor, fault)

    def _step_weights(self, gated: list[Actor]) -> list[float] | None:
        """``wake``: a message hidden behind the holder asks it for the wake-up before
        the holder releases (so the release finds the receipt, and may lose its answer)."""
        if self.bias != "wake":
            return None
        holder = self.row.get("run_id")
        waiting = holder is not None and self.row.get("wake_receipt") is None and any(
            m.deferred_on == holder for m in self.queue.messages)
        weights = []
        for a in gated:
            req = a.pending
            w = 1.0
            if req is not None and req.op == "UpdateItem" and "wake_receipt" in str(
                    req.params.get("UpdateExpression", "")) + str(
                    req.params.get("ExpressionAttributeNames", "")):
                w = 8.0
            elif holder is not None and a.run is not None and a.run[0] == holder and (
                    waiting or (self.queue.live() and self.row.get("wake_receipt") is None)):
                w = 0.2  # the holder holds on while a message may come and wait on it
            weights.append(w)
        return weights

    def _ev_outage(self) -> None:
        service, fault = OUTAGES[self.chooser.draw(len(OUTAGES))]
        n = OUTAGE_LENGTHS[self.chooser.draw(len(OUTAGE_LENGTHS))]
        self.outage = (service, fault, n)
        self.coverage.add((self._row_state(), f"outage:{service}:{fault}"))
        self.log(f"ENV outage: the next {n} {service} requests fail ({fault})")

    def _ev_burst(self) -> None:
        """Several distinct manual (or rule-driven) triggers, each run to its end."""
        n = 2 + self.chooser.draw(6)
        long_ids = self.chooser.chance(0.5)
        self.log(f"ENV burst of {n} manual triggers")
        for _ in range(n):
            mid = self._new_id()
            if long_ids:
                mid = (mid + "-" + "x" * 120)[:128]
            self.manuals.append(mid)
            self.manual_at[mid] = self.clock.now()
            event, tid = self._manual_event(mid)
            actor = self.deliver_direct("manual", event, tid, "burst")
            if actor is None:
                break
            self._run_to_end(actor)

    def _new_id(self) -> str:
        self._ids += 1
        return f"{self._ids:08x}-5e1f-4c2a-9b7d-{self._ids * 7919:012x}"

    def _state_of(self, trigger_id: str) -> str:
        """A trigger's state as the run log written so far shows it."""
        for rec in reversed(self.model.records):
            if rec.trigger_id == trigger_id:
                return rec.decision if rec.decision != "ran" else f"ran:{rec.status}"
        if any(inv.trigger_id == trigger_id for inv in self.model.invocations.values()):
            return "running"
        return "new"

    def _row_state(self) -> str:
        row = self.row
        if self.damaged:
            return "damaged"
        if row.get("paused_at_ms") is not None:
            return "paused"
        exp = row.get("expires_at_ms")
        if row.get("run_id") is None:
            return "free"
        if isinstance(exp, int) and exp + SKEW.total_seconds() * 1000 < self._now_ms():
            return "held-expired"
        return "held"

    def deliver_direct(self, kind: str, event: dict[str, Any], trigger_id: str,
                       label: str, container: Container | None = None) -> Actor | None:
        c = container or self._container()
        if c is None:
            return None
        self.coverage.add((self._state_of(trigger_id), f"deliver:{label}"))
        self.coverage.add((self._row_state(), f"deliver:{label}"))
        d = Delivery(len(self.deliveries) + 1, trigger_id, kind, self.step)
        self.deliveries.append(d)
        self.delivered_at[d.n] = self.clock.now()
        rid = self._new_id()
        self.log(f"ENV deliver {label} {trigger_id} -> c{c.n} (delivery #{d.n})")
        return self.spawn(f"{label}#{d.n}", "delivery",
                          lambda: c.job(dict(event), Ctx(rid, self._calls())), container=c,
                          delivery=d)

    def _tick_event(self, at: datetime) -> tuple[dict[str, Any], str]:
        from jobguard.triggers import format_instant

        text = format_instant(at)
        return {"job": JOB, "scheduled_at": text}, f"{JOB}@{text}"

    def _ev_tick(self) -> None:
        now = self.clock.now()
        at = T0 + ((now - T0) // TICK_EVERY) * TICK_EVERY
        if at not in self.ticks:
            self.ticks.append(at)
        event, tid = self._tick_event(at)
        self.deliver_direct("tick", event, tid, "tick")

    def _ev_retick(self) -> None:
        recent = self.ticks[-6:][::-1]
        at = recent[self.chooser.draw(len(recent))]
        event, tid = self._tick_event(at)
        self.deliver_direct("tick", event, tid, "tick-again")

    def _ev_future_tick(self) -> None:
        if FAR_FUTURE not in self.ticks:
            self.ticks.append(FAR_FUTURE)
        event, tid = self._tick_event(FAR_FUTURE)
        self.deliver_direct("tick", event, tid, "tick-far-future")

    def _manual_event(self, mid: str) -> tuple[dict[str, Any], str]:
        return {"job": JOB, "manual": True, "trigger_id": mid}, f"{JOB}@manual:{mid}"

    def _ev_manual(self) -> None:
        mid = self._new_id()
        self.manuals.append(mid)
        self.manual_at[mid] = self.clock.now()
        event, tid = self._manual_event(mid)
        self.deliver_direct("manual", event, tid, "manual")

    def _ev_remanual(self) -> None:
        # Lambda retries an asynchronous event for at most 6 hours (its longest maximum
        # event age): no copy of a manual trigger arrives later than that
        recent = self.manuals[-6:][::-1]
        mid = recent[self.chooser.draw(len(recent))]
        first = self.manual_at.get(mid)
        if first is not None and self.clock.now() - first > timedelta(hours=6):
            self.log(f"ENV manual {mid} too old to be retried by Lambda (over 6 h)")
            return
        event, tid = self._manual_event(mid)
        self.deliver_direct("manual", event, tid, "manual-again")

    def deliver_message(self, m: Message) -> Actor | None:
        c = self._container()
        if c is None:
            return None
        now = self._now_ms()
        receipt = self.queue.receive(m, now)
        if receipt is None:
            self.dlq_steps[m.seq] = self.step
            self.log(f"ENV sqs {m.message_id} ({m.trigger_id()}) reached maxReceiveCount: "
                     f"moved to the DLQ")
            self.coverage.add(("queued-msg", "dlq"))
            return None
        garbage = self.garbage.get(m.seq)
        body = m.fields()
        kind = "garbage" if garbage is not None else str(body.get("kind"))
        tid = f"{JOB}@message:{m.message_id}" if garbage is not None else str(
            body.get("trigger_id"))
        state = f"garbage:{garbage}" if garbage is not None else self._state_of(tid)
        self.coverage.add((state, f"sqs:{kind}:recv{min(m.receive_count, 3)}"))
        ahead = [g for g in self.queue.messages
                 if g.seq in self.garbage and g.group == m.group and g.seq < m.seq]
        if garbage is None and m.receive_count == 1 and ahead:
            self.behind_garbage += 1
            self.log(f"ENV sqs {m.message_id} ({tid}) was behind "
                     f"{', '.join(g.message_id for g in ahead)} (no trigger)")
            self.model.served_behind_garbage(
                tid, [g.message_id for g in ahead if g.state == "dlq"])
            self._note_violations()
        d = Delivery(len(self.deliveries) + 1, tid, kind, self.step)
        self.deliveries.append(d)
        record = {"messageId": m.message_id, "receiptHandle": receipt, "body": m.body,
                  "attributes": {"ApproximateReceiveCount": str(m.receive_count),
                                 "SentTimestamp": str(m.sent_ms),
                                 "ApproximateFirstReceiveTimestamp": str(m.first_receive_ms),
                                 "MessageGroupId": m.group,
                                 "MessageDeduplicationId": m.dedup_id},
                  "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                  "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:triggers.fifo",
                  "awsRegion": "us-east-1"}
        self.log(f"ENV sqs deliver {m.message_id} {kind} {tid} receive #{m.receive_count} "
                 f"-> c{c.n} (delivery #{d.n})")

        def done(actor: Actor) -> None:
            if garbage is not None and (actor.killed or actor.exc is not None):
                self.model.garbage_delivered(m.message_id, "killed" if actor.killed
                                             else "returned-faulted" if actor.faults
                                             else "returned")
                self._note_violations()
            if actor.killed or actor.exc is not None:
                return  # comes back after its visibility timeout
            failed = {f.get("itemIdentifier") for f in
                      (actor.result or {}).get("batchItemFailures", [])}
            if m.message_id not in failed and self.queue.delete_by_receipt(receipt):
                self.log(f"ENV sqs {m.message_id} deleted (handled)")
            if garbage is not None:
                returned = m.message_id in failed
                d.outcome = "returned" if returned else "rejected"
                self.model.garbage_delivered(m.message_id, "rejected" if not returned
                                             else "returned-faulted" if actor.faults
                                             else "returned")
                self._note_violations()
                return
            if d.outcome is None:
                d.outcome = "failed" if m.message_id in failed else "handled"
                d.run_id = d.invoked[-1] if d.invoked else None
                if m.message_id in failed and not actor.faults:
                    # refused before any decision: jobguard cannot read its own message
                    self.model.violate("END/own-message-refused", f"message {m.message_id} "
                                       f"({tid}), written by jobguard, was refused before "
                                       "any decision (it can only end in the DLQ)")
                    self._note_violations()

        rid = self._new_id()
        return self.spawn(f"sqs-{kind}#{d.n}", "sqs",
                          lambda: c.job({"Records": [record]}, Ctx(rid, self._calls())),
                          container=c,
                          delivery=d, on_done=done)

    def _ev_garbage(self) -> None:
        """Someone who is not jobguard sends the trigger queue a message that can never
        become a trigger, in the job's message group (bias ``garbage``)."""
        shape, body = GARBAGE[self.chooser.draw(len(GARBAGE))]
        m = self.queue.send(body, JOB, f"garbage-{len(self.garbage) + 1}", self._now_ms())
        self.garbage[m.seq] = shape
        self.coverage.add((self._row_state(), f"garbage:{shape}"))
        behind = sum(1 for x in self.queue.live() if x.seq < m.seq)
        self.log(f"ENV garbage: message {m.message_id} ({shape}), no trigger, is sent to "
                 f"the trigger queue ({behind} message(s) ahead of it)")

    def _ev_sqs(self) -> None:
        m = self.queue.next_visible(self._now_ms())
        if m is not None:
            self.deliver_message(m)

    def _ev_renew(self) -> None:
        hbs = self._renewable()
        hb = hbs[self.chooser.draw(len(hbs))]
        info = self.hb_run.get(id(hb))
        name = f"renew-{info[0][-6:]}" if info else "renew"
        self.spawn(name, "heartbeat", hb.renew_once, heartbeat=hb)

    def _disrupt(self, why: str) -> None:
        """Something outside a delivery's own requests may make it fail (a clock jump
        past its heartbeat, an operator command, a skewed clock): count it as a fault."""
        for a in self.actors:
            if a.delivery is not None:
                a.delivery.faults += 1

    def _ev_clock(self) -> None:
        weights = LATE_CLOCK_WEIGHTS if self.bias == "late" else CLOCK_WEIGHTS
        delta = CLOCK_STEPS[self.chooser.draw(len(CLOCK_STEPS), weights)]
        if delta >= timedelta(seconds=20):
            self._disrupt("clock")
        self.coverage.add((self._row_state(), f"clock+{int(delta.total_seconds())}s"))
        self._advance(delta)
        self.log(f"ENV clock +{delta}")
        # Lambda stops an invocation at its timeout (15 minutes at most): one the clock
        # left behind is gone, as if killed (its sender retries it)
        limit_ms = int(LAMBDA_TIMEOUT.total_seconds() * 1000)
        for actor in [a for a in self._gated() if a.container is not None
                      and a.heartbeat is None and self._now_ms() - a.born_ms > limit_ms]:
            self.log(f"ENV {actor.name} ran past Lambda's 15-minute limit: stopped")
            self._kill(actor)

    def _ev_skew(self) -> None:
        c = self.containers[self.chooser.draw(len(self.containers))]
        offset = SKEWS[self.chooser.draw(len(SKEWS))]
        c.clock.offset = offset
        self.offsets_beyond_skew = self.offsets_beyond_skew or abs(offset) > SKEW
        self._disrupt("skew")
        self.coverage.add((self._row_state(), f"skew{int(offset.total_seconds()):+d}s"))
        self.log(f"ENV c{c.n} wall clock offset now {offset.total_seconds():+.0f}s")

    def _operator(self, name: str, fn: Any) -> None:
        self._disrupt(name)
        self.coverage.add((self._row_state(), f"operator:{name}"))
        self.log(f"ENV operator {name}")
        self.spawn(f"op-{name}", "operator", fn)

    def _op_clock(self) -> int:
        return self._now_ms()

    def _ev_pause(self) -> None:
        def fn() -> None:
            self.store.pause(JOB, reason="operator pause", now_ms=self._op_clock())
            self.paused = True
        self._operator("pause", fn)

    def _ev_resume(self) -> None:
        def fn() -> None:
            self.store.resume(JOB)
            self.paused = False
        self._operator("resume", fn)

    def _force(self) -> Any:
        """``jobguard release --force`` (what jobguard.cli.operator.cmd_release does, on
        the explorer's clients): on a damaged row ``force_release`` repairs it."""
        from jobguard.errors import DamagedRowError

        try:
            lease = self.store.read_lease(JOB)
        except DamagedRowError:
            holders = {self.row.get("run_id"): self.row.get("trigger_id")}
            # as cmd_release does when its own read finds the row damaged
            repaired = self.store.repair(JOB, now_ms=self._op_clock())
            self.model.operator_steps.append(self.step)
            self._disrupt("repair landed")
            # the repair frees the damaged row's holder and marks its trigger released
            # (conditioned on that holder): the model learns it as from a force release
            run = self.row.get("last_run_id")
            trigger = holders.get(run) if isinstance(run, str) else None
            if self.row.get("released_by") == "operator:operator" and isinstance(trigger, str):
                self.model.force_released(trigger, run, step=self.step, recorded=False)
            return repaired
        if lease.run_id is None:
            return "free"
        released = self.store.force_release(ForceRelease(JOB, holder_run_id=lease.run_id,
                                                         fence=lease.fence,
                                                         now_ms=self._op_clock()))
        if released:
            # the release lands now, not when the command was typed: a delivery that
            # began since (its run the one released) may fail from it
            self._disrupt("release-force landed")
        if released and lease.trigger_id:
            # a release that met a row damaged since its read repaired it, which promises
            # no run record (see _force's repair branch)
            self.model.force_released(lease.trigger_id, lease.run_id, step=self.step,
                                      recorded=self.damaged is None)
        return released

    def _ev_force(self) -> None:
        self._operator("release-force", self._force)

    def _ev_recovery(self) -> None:
        from jobguard.recovery import recover

        c = self._container()
        if c is None:
            return
        n = len(self.source)
        event = {"job": JOB, "cursor_from": "000000", "cursor_to": f"{n:06d}",
                 "dry_run": False, "wait_seconds": 0, "requested_by": "operator"}
        options = {"store": self.store, "queue": self.trigger_queue, "clock": c.clock,
                   "owner": f"recovery/c{c.n}"}
        self.coverage.add((self._row_state(), "recovery"))
        self.log("ENV recovery requested")
        self.spawn("recovery", "recovery",
                   lambda: recover(event, job=c.batch, guard_options=options), container=c)

    def _ev_reconcile(self) -> None:
        from jobguard import GuardedJob, OverlapPolicy, current_run
        from jobguard.batch import sweep

        c = self._container()
        if c is None:
            return
        # as lib/jobguard/functions/reconciler.py builds it: SKIP, serving no trigger, and (a queued
        # job's, as the stack deploys it) with the job's queue, to wake and resend
        queued = self.config.needs_queue
        config = replace(self.config, policy=OverlapPolicy.SKIP,
                         trigger_queue_url=QUEUE_URL if queued else None)
        guard = GuardedJob(config, lambda e, ctx: sweep(current_run(), c.batch.reconcile).as_dict(),
                           store=self.store, clock=c.clock, owner=f"reconciler/c{c.n}",
                           serves_triggers=False,
                           **({"queue": self.trigger_queue} if queued else {}))
        rid = self._new_id()
        self.coverage.add((self._row_state(), "reconciler"))
        self.log("ENV reconciler sweep")
        self.spawn("reconciler", "reconciler",
                   lambda: guard({"job": JOB, "manual": True, "trigger_id": f"reconcile-{rid}"},
                                 Ctx(rid)), container=c)

    def _ev_kill(self) -> None:
        gated = self._gated()
        actor = gated[self.chooser.draw(len(gated))]
        self.coverage.add((self._row_state(), f"kill:{actor.kind}"))
        self.log(f"ENV kill {actor.name} (its process is gone)")
        self._kill(actor)

    def _kill(self, actor: Actor) -> None:
        victims = [actor]
        if actor.container is not None:
            # the run's heartbeat dies with its process
            for hb_key, info in list(self.hb_run.items()):
                if actor.run is not None and info[0] == actor.run[0]:
                    self.heartbeats.pop(hb_key, None)
            run = actor.pending.run if actor.pending else None
            if run is not None:
                for key, info in list(self.hb_run.items()):
                    if info[0] == run[0]:
                        self.heartbeats.pop(key, None)
                        victims += [a for a in self.actors
                                    if a.heartbeat is not None and id(a.heartbeat) == key]
        for v in victims:
            v.killed = True
            v.go.release()
            self._wait_parked(v)

    def _ev_expire_visibility(self) -> None:
        now = self._now_ms()
        inflight = self.queue.inflight(now)
        m = inflight[self.chooser.draw(len(inflight))]
        self.queue.expire_visibility(m, now)
        self.coverage.add(("queued-msg", "visibility-expired"))
        self.log(f"ENV sqs {m.message_id} ({m.trigger_id()}) visibility expired: visible again")

    def _ev_ttl(self) -> None:
        if not self.ttl_attribute:
            return
        now_s = self._now_ms() // 1000
        expired = []
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            page = self.observer.scan(**kwargs)
            for item in page["Items"]:
                ttl = item.get(self.ttl_attribute, {}).get("N")
                if ttl is not None and int(float(ttl)) <= now_s:
                    expired.append(item)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if not expired:
            return
        expired.sort(key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        item = expired[self.chooser.draw(len(expired))]
        self.observer.delete_item(TableName=self.table,
                                  Key={"pk": item["pk"], "sk": item["sk"]})
        self.coverage.add(("expired-item", "ttl-delete"))
        self.log(f"ENV TTL deleted {item['pk']['S']} / {item['sk']['S']}")
        self._read_row()

    def _ev_work(self) -> None:
        start = len(self.source)
        for i in range(start, start + 1 + self.chooser.draw(2)):
            self.source.append({"id": f"c{i:03d}", "change": f"change {i}"})
        if self.strangers:
            self.source.append(stranger(start))
        self.log(f"ENV source now has {len(self.source)} records")

    def _ev_damage(self) -> None:
        what = DAMAGES[self.chooser.draw(len(DAMAGES))]
        key = {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}}
        if what == "delete-row":
            self.observer.delete_item(TableName=self.table, Key=key)
            self.damaged = None  # a deleted row is not damaged; fences must still not repeat
        else:
            how, attr = what.split(":")
            if how == "remove":
                self.observer.update_item(TableName=self.table, Key=key,
                                          UpdateExpression="REMOVE #a",
                                          ExpressionAttributeNames={"#a": attr})
            else:
                self.observer.update_item(TableName=self.table, Key=key,
                                          UpdateExpression="SET #a = :v",
                                          ExpressionAttributeNames={"#a": attr},
                                          ExpressionAttributeValues={":v": {"S": "garbage"}})
            # every attribute damaged so far (a delivery may name any of them)
            self.damaged = attr if self.damaged in (None, attr) else \
                ",".join(sorted(set(self.damaged.split(",")) | {attr}))
        for a in self.actors:  # deliveries under way meet the damage too
            if a.delivery is not None and self.damaged is not None:
                a.delivery.damaged = self.damaged
        self.coverage.add((self._row_state(), f"damage:{what}"))
        before = self.row
        self._read_row()
        self.log(f"ENV lease row damaged: {what} | row {self._row_diff(before, self.row)}")

    # -- settling: faults stop, everything pending must be decided ------------------------------

    def _run_to_end(self, actor: Actor | None) -> None:
        guard = 0
        while actor is not None and not actor.done:
            if actor.pending is None:
                break
            self._step_actor(actor, "ok")
            guard += 1
            if guard > 500:
                raise Deadlock(f"{actor.name} made more than 500 requests while settling")

    def _drain_actors(self) -> None:
        guard = 0
        while self._gated():
            self._step_actor(self._gated()[0], "ok")
            guard += 1
            if guard > 3000:
                raise Deadlock("actors kept making requests while settling")

    def _settle(self) -> None:
        self.chooser.quiet = True
        self.log("--- faults stop: in-flight work ends, the operator tidies up, "
                 "the queue drains ---")
        self._drain_actors()
        if self.damaged is not None:
            self.log("ENV operator repairs the damaged row: jobguard release --force")
            actor = self.spawn("op-repair", "operator", self._force)
            self._run_to_end(actor)
            if actor.exc is not None:
                self.model.violate("DAMAGE/no-way-out",
                                   "release --force on the damaged row failed: "
                                   f"{type(actor.exc).__name__}: {actor.exc}")
                self._note_violations()
                self.log("--- end: the job is wedged; later checks are skipped ---")
                return
            self.damaged = None
        for c in self.containers:
            c.clock.offset = timedelta(0)
        actor = self.spawn("op-resume", "operator", lambda: self.store.resume(JOB))
        self._run_to_end(actor)
        self.paused = False
        if self.bias == "chain":
            self._settle_chains()
        # 1. the queue alone drains: follow-ups of coalesced triggers must run now, not
        #    when some sender retries
        self._drain_queue(rounds=4)
        self.model.coalesced_checks(
            dlq=[(m.trigger_id(), self.dlq_steps.get(m.seq, 0)) for m in self.queue.dlq])
        self._note_violations()
        # 2. the senders retry what failed; everything pending is decided
        undecided: list[str] = []
        for rounds in range(1, 5):
            self.log(f"ENV settle round {rounds}: senders retry failed deliveries")
            undecided = self._retry_undecided()
            self._drain_queue(rounds=2)
            undecided = self._undecided()
            if not self.queue.live() and not undecided:
                break
        # 2b. the failed-ticks runbook (README): the operator replays a trigger that went
        #     to the failed-ticks queue; one queued before its delivery died (its message
        #     never sent) holds its place, and the queued count, until then; one coalesced
        #     before its send of the follow-up failed waits for it as well
        self._replay_failed_queued()
        # 3. what waited for the senders' retries (see Model.coalesced_checks)
        self.model.coalesced_checks(
            dlq=[(m.trigger_id(), self.dlq_steps.get(m.seq, 0)) for m in self.queue.dlq],
            final=True, failed_events=frozenset(self.dropped_by_lambda))
        self._note_violations()
        if any(m.fields().get("kind") == "queued" and m.seq not in self.garbage
               for m in self.queue.dlq):
            # README: a queued trigger dead-lettered before it ran leaves its count on the
            # lease row; the operator's `jobguard repair JOB` recounts it
            self.log("ENV the DLQ holds a queued trigger: operator runs jobguard repair")
            actor = self.spawn("op-repair-count", "operator",
                               lambda: self.store.repair(JOB, now_ms=self._op_clock()))
            self._run_to_end(actor)
            if actor.exc is not None:
                self.model.violate("BOUND/repair-failed", f"jobguard repair failed: "
                                   f"{type(actor.exc).__name__}: {actor.exc}")
        self._read_row()
        runs = [r.as_dict() for r in self._runs()]
        dlq = [(m.trigger_id(), self.dlq_steps.get(m.seq, 0)) for m in self.queue.dlq]
        queued_n = self.row.get("queued_n", 0)
        self.model.settle_checks(
            runs=runs, dlq=dlq, queue_live=[m.trigger_id() for m in self.queue.live()],
            undecided=undecided, queued_n=int(queued_n) if isinstance(queued_n, int) else -1,
            invocations_after={}, failed_events=frozenset(self.dropped_by_lambda))
        if self.garbage:
            rejected = [r for r in runs if r["decision"] == "rejected"]
            self.model.garbage_checks(
                states={m.message_id: m.state for m in self.queue.messages
                        if m.seq in self.garbage},
                recorded={m.message_id: sum(1 for r in rejected
                                            if r["trigger_id"] == f"{JOB}@message:"
                                            f"{m.message_id}")
                          for m in self.queue.messages if m.seq in self.garbage})
        self._note_violations()
        # a fresh tick runs
        self._advance(TICK_EVERY)
        at = T0 + ((self.clock.now() - T0) // TICK_EVERY) * TICK_EVERY
        event, tid = self._tick_event(at)
        actor = self.deliver_direct("tick", event, tid, "fresh-tick")
        self._run_to_end(actor)
        self._drain_actors()
        for _ in range(3):
            m = self.queue.next_visible(self._now_ms())
            if m is None:
                break
            self._run_to_end(self.deliver_message(m))
            self._drain_actors()
        if not any(inv.trigger_id == tid for inv in self.model.invocations.values()):
            last = self.deliveries[-1]
            self.model.violate("LIVE/fresh-tick", f"a fresh tick after settling did not run: "
                               f"{last.outcome} {last.error or ''}".strip(),
                               key=str(last.outcome))
        else:
            self._check_ledger()
        self._note_violations()
        self.log(f"--- end: {len(self.model.violations)} violation(s) ---")

    def _replay_failed_queued(self) -> None:
        from jobguard.dynamodb import DynamoJobStore
        from jobguard.trigger_state import State

        reader = DynamoJobStore(self.table, client=self.observer)
        replayed = False
        stale_ticks: list[str] = []
        for tid in sorted(self.dropped_by_lambda):
            if not tid.startswith(f"{JOB}@manual:"):
                # README runbook: a failed tick is sent again; if it is recorded stale
                # (past stale_after, and not a tick the job had already queued: that one
                # is still owed), the operator starts a manual run instead
                at = datetime.fromisoformat(tid.split("@", 1)[1].replace("Z", "+00:00"))
                self.log(f"ENV failed-ticks alarm: the operator sends {tid} again "
                         "(README runbook)")
                event, _ = self._tick_event(at)
                actor = self.deliver_direct("tick", event, tid, "tick-replay")
                delivery = actor.delivery if actor is not None else None
                self._run_to_end(actor)
                self._drain_actors()
                replayed = True
                if delivery is not None and delivery.outcome == "stale":
                    stale_ticks.append(tid)
                continue
            item = reader.read_trigger(JOB, tid)
            if item is None or item.state not in (State.QUEUED, State.COALESCED):
                continue
            self.log(f"ENV failed-ticks alarm: the operator replays {tid}, "
                     f"{item.state.value} before its delivery failed (README runbook)")
            event, _ = self._manual_event(tid.split("@manual:", 1)[1])
            self._run_to_end(self.deliver_direct("manual", event, tid, "manual-replay"))
            self._drain_actors()
            replayed = True
        if stale_ticks:
            mid = self._new_id()
            self.manuals.append(mid)
            self.manual_at[mid] = self.clock.now()
            event, new_tid = self._manual_event(mid)
            self.log(f"ENV failed-ticks alarm: {', '.join(stale_ticks)} past stale_after; "
                     "the operator starts a manual run instead (README runbook)")
            self._run_to_end(self.deliver_direct("manual", event, new_tid, "manual-instead"))
            self._drain_actors()
            replayed = True
        if replayed:
            self._drain_queue(rounds=2)

    def _drain_queue(self, *, rounds: int) -> None:
        for n in range(rounds):
            self._advance(max(LEASE + SKEW, timedelta(seconds=VISIBILITY_S)) + timedelta(seconds=1))
            self.log("ENV settle: clock past every lease and visibility; "
                     f"the queue drains ({n + 1})")
            delivered = 0
            while delivered < 25:
                m = self.queue.next_visible(self._now_ms())
                if m is None:
                    break
                self._run_to_end(self.deliver_message(m))
                self._drain_actors()
                delivered += 1
            if not self.queue.live():
                return

    def _runs(self) -> list[Any]:
        """The run log (``list_runs``); a raw query if the lease row cannot be read."""
        from jobguard.dynamodb import DynamoJobStore, run_record

        try:
            return DynamoJobStore(self.table, client=self.observer).list_runs(JOB, limit=10_000)
        except Exception as exc:  # noqa: BLE001 - a damaged lease row
            self.model.violate("DAMAGE/list-runs", f"list_runs failed: {type(exc).__name__}: {exc}")
        items = self.observer.query(
            TableName=self.table, KeyConditionExpression="pk = :pk AND begins_with(sk, :r)",
            ExpressionAttributeValues={":pk": {"S": f"JOB#{JOB}"}, ":r": {"S": "RUN#"}},
            ConsistentRead=True)["Items"]
        return [run_record(i) for i in items]

    def _undecided(self) -> list[str]:
        """Direct triggers delivered whose every delivery failed (the sender retries)."""
        got: dict[str, bool] = {}
        for d in self.deliveries:
            if d.kind not in DIRECT_KINDS:
                continue
            ok = d.outcome not in (None, "error", "killed")
            got[d.trigger_id] = got.get(d.trigger_id, False) or ok
        return sorted(t for t, ok in got.items() if not ok and t not in self.dropped_by_lambda)

    def _retry_undecided(self) -> list[str]:
        """Lambda retries each asynchronous invocation that failed (raised, or its process
        died), whatever other deliveries of the same trigger did: a duplicate delivery has
        its own retries. So every failed direct delivery not yet retried is sent again."""
        todo = [d for d in self.deliveries
                if d.kind in DIRECT_KINDS and not d.retried
                and d.outcome in (None, "error", "killed")]
        for d in todo:
            d.retried = True
            tid = d.trigger_id
            first = self.manual_at.get(tid.split("@manual:", 1)[1]) \
                if tid.startswith(f"{JOB}@manual:") else self.delivered_at.get(d.n)
            if first is not None and self.clock.now() - first > MAX_EVENT_AGE:
                # Lambda retries an asynchronous event for at most 6 hours from the event
                # (every copy of a manual trigger is one, as in _ev_remanual; each copy of
                # a tick the Scheduler sent is its own): past that it went to the
                # on-failure destination
                self.log(f"ENV delivery #{d.n} of {tid} too old to be retried by Lambda "
                         "(over 6 h): on the failed-ticks queue")
                self.dropped_by_lambda.add(tid)
                continue
            if tid.startswith(f"{JOB}@manual:"):
                event, _ = self._manual_event(tid.split("@manual:", 1)[1])
                label = "manual-retry"
            else:
                at = datetime.fromisoformat(tid.split("@", 1)[1].replace("Z", "+00:00"))
                event, _ = self._tick_event(at)
                label = "tick-retry"
            actor = self.deliver_direct("manual" if "manual" in label else "tick", event, tid,
                                        label)
            self._run_to_end(actor)
            self._drain_actors()
        return self._undecided()


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def stranger(n: int) -> dict[str, Any]:
    """A source record no work id can be made for: even ones hold a lone surrogate in
    their id (a broken JSON escape), odd ones have no id at all."""
    if n % 2 == 0:
        return {"id": f"c{n:03d}-" + chr(0xD83D), "change": f"stranger {n}"}
    return {"change": f"stranger {n}, no id"}


def is_stranger(record: dict[str, Any]) -> bool:
    return str(record.get("change", "")).startswith("stranger")


def key_of(record: dict[str, Any]) -> str:
    """The ledger key the source record is recorded under: its work id's, or, for a
    stranger, its rejected row's (the README: keyed by the record's content)."""
    from jobguard.claims import fingerprint
    from jobguard.workitems import WorkId, rejected_key

    if is_stranger(record):
        return rejected_key(fingerprint(record) or "")
    return str(WorkId(record["id"], "create-note"))


def run_history(*, seed: int | None = None, choices: list[int] | None = None,
                steps: int = 160, trace: bool = True, bias: str = "",
                strangers: bool = False, policy: str | None = None) -> Result:
    """One history: random from ``seed`` (``steps`` draws of faults), or replayed.
    ``policy`` fixes the job's policy (else drawn, the first choice)."""
    import random as _random

    if choices is None:
        budget = steps if seed is None else _random.Random(seed).randint(steps // 2, steps)
        chooser = Chooser(seed, budget=budget)
    else:
        chooser = Chooser(replay=choices)
    sim = Sim(chooser, seed=seed, trace=trace, bias=bias, strangers=strangers, policy=policy)
    return sim.run()
