"""Building blocks for the trigger-state regression tests (issue 14).

Everything here looks at what a user sees: the handler's calls, the run log, the
trigger queue, and the raw lease row only where its size or its damage is the subject.
The two places that depend on an operator API whose shape is changing are isolated in
:func:`force_release` and :func:`cli`.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from jobguard import current_run
from jobguard.requests import ForceRelease
from jobguard.triggers import format_instant

from ._support import Gate

WRITES = frozenset({"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems"})


# -- triggers -------------------------------------------------------------------------


def tick_id(job: str, at: datetime) -> str:
    """The identity of a tick (DESIGN: job + scheduled time)."""
    return f"{job}@{format_instant(at)}"


def manual(job: str, name: str) -> tuple[dict[str, Any], str]:
    """A manual trigger with its own trigger id: the event and the trigger's identity."""
    return {"job": job, "manual": True, "trigger_id": name, "requested_by": "ops"}, \
        f"{job}@manual:{name}"


# -- the handler ----------------------------------------------------------------------


Match = str | Callable[[str], bool]


def _matches(match: Match, trigger_id: str) -> bool:
    return match(trigger_id) if callable(match) else match == trigger_id


@dataclass
class Script:
    """A handler whose behaviour is scripted per trigger (an id, or a predicate on it):
    hold it behind a gate, make it fail a number of times. Every call is recorded as
    (trigger id, fence)."""

    calls: list[tuple[str, int]] = field(default_factory=list)
    gates: list[tuple[Match, Gate]] = field(default_factory=list)
    failures: list[list[Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self, match: Match) -> Gate:
        gate = Gate()
        self.gates.append((match, gate))
        return gate

    def fail(self, match: Match, times: int = 1) -> None:
        self.failures.append([match, times])

    def ran(self, match: Match) -> int:
        with self.lock:
            return sum(1 for t, _ in self.calls if _matches(match, t))

    def fences(self) -> list[int]:
        with self.lock:
            return [f for _, f in self.calls]

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        trigger_id = run.trigger.trigger_id
        fail = False
        with self.lock:
            self.calls.append((trigger_id, run.fence))
            for entry in self.failures:
                if entry[1] > 0 and _matches(entry[0], trigger_id):
                    entry[1] -= 1
                    fail = True
                    break
            gate = next((g for m, g in self.gates if _matches(m, trigger_id)), None)
        if gate is not None and not gate.release.is_set():
            gate.hold()
        if fail:
            raise RuntimeError(f"scripted failure of {trigger_id}")
        run.ensure_lease()
        return {"ran": trigger_id, "fence": run.fence}


def start(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn`` in a thread; the box gets ``result`` or ``error``."""
    box: dict[str, Any] = {}

    def target() -> None:
        box["ident"] = threading.get_ident()
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def hold_a_run(job: Any, script: Script, job_name: str, at: datetime) \
        -> tuple[Gate, threading.Thread, dict[str, Any]]:
    """Tick ``at``'s run started in a thread and held in its handler (holding the
    lease): (its gate, its thread, its box)."""
    from ._support import tick

    gate = script.hold(tick_id(job_name, at))
    thread, box = start(lambda: job(tick(job_name, at), None))
    assert gate.entered.wait(10), "the run never reached its handler"
    return gate, thread, box


def call(job: Any, event: Any) -> Any:
    """Invoke like Lambda does; an exception is the invocation's failure, returned."""
    try:
        return job(event, None)
    except Exception as exc:  # noqa: BLE001 - the caller looks at it
        return exc


# -- the run log ----------------------------------------------------------------------


def records_of(aws: Any, job: str, trigger_id: str) -> list[Any]:
    return [r for r in aws.runs(job) if r.trigger_id == trigger_id]


def decisions_of(aws: Any, job: str, trigger_id: str) -> list[str]:
    return [r.decision.value for r in records_of(aws, job, trigger_id)]


def outcomes_of(aws: Any, job: str, trigger_id: str) -> list[tuple[str, str]]:
    return [(r.decision.value, r.status.value) for r in records_of(aws, job, trigger_id)]


def record_text(record: Any) -> str:
    """Everything a run record says, as one string (to look for a name in it)."""
    import dataclasses

    return " ".join(str(v) for v in dataclasses.asdict(record).values())


# -- the trigger queue (a hand-driven event source mapping) ---------------------------


@dataclass
class Delivery:
    """One message handed to the function, and what the function answered."""

    message_id: str
    receipt: str
    body: dict[str, Any]
    response: Any
    error: BaseException | None = None

    @property
    def failed(self) -> bool:
        """Reported as a batch item failure (or the whole invocation failed): SQS keeps
        the message and delivers it again after its visibility timeout."""
        if self.error is not None:
            return True
        failures = (self.response or {}).get("batchItemFailures", [])
        return any(f.get("itemIdentifier") == self.message_id for f in failures)


def deliver(aws: Any, job_name: str, job: Any, *, visibility_s: int = 30) -> Delivery | None:
    """Deliver one visible message of the job's queue as Lambda's SQS mapping does:
    delete it unless reported failed. None when nothing is visible."""
    url = aws.queues[job_name]
    messages = aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=visibility_s,
        AttributeNames=["All"]).get("Messages", [])
    if not messages:
        return None
    (m,) = messages
    arn = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    record = {
        "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
        "attributes": m.get("Attributes", {}), "messageAttributes": {},
        "md5OfBody": m.get("MD5OfBody", ""), "eventSource": "aws:sqs",
        "eventSourceARN": arn, "awsRegion": arn.split(":")[3],
    }
    try:
        body = json.loads(m["Body"])
    except ValueError:
        body = {}
    delivery = Delivery(m["MessageId"], m["ReceiptHandle"], body, None)
    try:
        delivery.response = job({"Records": [record]}, None)
    except Exception as exc:  # noqa: BLE001 - an invocation error: the batch comes back
        delivery.error = exc
    if not delivery.failed:
        aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return delivery


def comes_back(aws: Any, job_name: str, delivery: Delivery) -> None:
    """The visibility timeout of a failed delivery ran out: the message is visible
    again (what hours of real time would do)."""
    with contextlib.suppress(ClientError):
        aws.sqs.change_message_visibility(QueueUrl=aws.queues[job_name],
                                          ReceiptHandle=delivery.receipt, VisibilityTimeout=0)


def visible(aws: Any, job_name: str) -> int:
    """Messages receivable right now."""
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=aws.queues[job_name], AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def drain(aws: Any, job_name: str, job: Any, *, limit: int = 20) -> list[Delivery]:
    """Deliver until nothing is visible (failed deliveries stay invisible)."""
    done = []
    for _ in range(limit):
        delivery = deliver(aws, job_name, job)
        if delivery is None:
            break
        done.append(delivery)
    return done


# -- faults through botocore event hooks ----------------------------------------------


@contextlib.contextmanager
def lose_next_write_response(client: Any, *, thread_ident: Callable[[], int | None]) \
        -> Iterator[list[str]]:
    """The next DynamoDB write made by one thread that the server applies (HTTP 200)
    loses its response: the caller gets ``ReadTimeoutError`` although the write landed.
    Yields the operations whose response was lost."""
    lost: list[str] = []

    def after_call(http_response: Any, model: Any, **_: Any) -> None:
        if lost or threading.get_ident() != thread_ident():
            return
        if model.name in WRITES and getattr(http_response, "status_code", 0) == 200:
            lost.append(model.name)
            raise ReadTimeoutError(endpoint_url="https://dynamodb (response lost)")

    client.meta.events.register("after-call.dynamodb", after_call, unique_id="lose-write")
    try:
        yield lost
    finally:
        client.meta.events.unregister("after-call.dynamodb", unique_id="lose-write")


@contextlib.contextmanager
def fail_next_send(client: Any, *, meanwhile: Callable[[], None] | None = None) \
        -> Iterator[list[dict[str, Any]]]:
    """The next SQS ``SendMessage`` fails (an error the SDK does not retry) and is not
    sent; ``meanwhile`` runs first, while that send is in flight. Yields the failed
    sends' parameters."""
    failed: list[dict[str, Any]] = []

    def before_call(params: Any, **_: Any) -> None:
        if failed:
            return
        failed.append(dict(params))
        if meanwhile is not None:
            meanwhile()
        raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"},
                           "ResponseMetadata": {"HTTPStatusCode": 500}}, "SendMessage")

    client.meta.events.register("before-call.sqs.SendMessage", before_call,
                                unique_id="fail-send")
    try:
        yield failed
    finally:
        client.meta.events.unregister("before-call.sqs.SendMessage", unique_id="fail-send")


# -- operator actions (the API whose shape the redesign changes) ----------------------


def force_release(store: Any, job: str, *, holder_run_id: str, fence: int, now_ms: int,
                  by: str, reason: str) -> Any:
    """``store.force_release`` with who and why (the redesigned, keyword-only ``by`` and
    ``reason``); the old signature has neither, and is called without them."""
    try:
        return store.force_release(ForceRelease(job, holder_run_id=holder_run_id, fence=fence,
                                                now_ms=now_ms, by=by, reason=reason))
    except TypeError as exc:
        if "by" not in str(exc) and "reason" not in str(exc):
            raise
        return store.force_release(ForceRelease(job, holder_run_id=holder_run_id, fence=fence,
                                                now_ms=now_ms))


def cli(aws: Any, *args: str) -> tuple[int, str, str]:
    """Run the ``jobguard`` command in this process (moto answers its AWS calls)."""
    from jobguard.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--table", aws.table, *args])
        except SystemExit as exc:  # argparse refused the arguments
            code = int(exc.code or 0)
        except Exception as exc:  # noqa: BLE001 - a traceback instead of a message
            import traceback

            traceback.print_exc()
            return -1, out.getvalue(), f"{type(exc).__name__}: {exc}\n{err.getvalue()}"
    return code, out.getvalue(), err.getvalue()


def cli_force_release(aws: Any, job: str) -> tuple[int, str, str]:
    """``jobguard release JOB --force --yes``, saying why when the command takes a reason."""
    code, out, err = cli(aws, "release", job, "--force", "--yes", "--reason", "repair")
    if code == 2 and "unrecognized arguments" in err:
        code, out, err = cli(aws, "release", job, "--force", "--yes")
    return code, out, err


# -- the raw lease row ----------------------------------------------------------------


def _value_bytes(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_bytes(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_bytes(x) + 1 for x in v)
    if kind in ("SS",):
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(_value_bytes({"N": x}) for x in v)
    if kind == "BS":
        return sum(len(x) for x in v)
    raise ValueError(kind)


def item_bytes(item: dict[str, Any] | None) -> int:
    """An item's size as DynamoDB counts it: attribute names plus values, in bytes."""
    if not item:
        return 0
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def compare_mismatched_types_as_false(monkeypatch: Any) -> None:
    """Make moto evaluate ``<``/``>``/``<=``/``>=`` between values of different types as
    DynamoDB does (the condition is false) instead of raising Python's TypeError."""
    from moto.dynamodb import comparisons

    for name in ("OpLessThan", "OpGreaterThan", "OpLessThanOrEqual", "OpGreaterThanOrEqual"):
        op = getattr(comparisons, name)
        original = op.expr

        def expr(self: Any, item: Any, _original: Any = original) -> bool:
            try:
                return bool(_original(self, item))
            except TypeError:
                return False

        monkeypatch.setattr(op, "expr", expr)
