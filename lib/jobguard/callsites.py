"""Every AWS call jobguard makes, and what it does when that call misbehaves.

Each module that talks to AWS declares one :class:`CallSite` per call, right beside the
function that makes it, saying how each fault is handled there:

- ``THROTTLE``: every attempt answered ``ThrottlingException`` /
  ``ProvisionedThroughputExceededException`` (the SDK's retries ran out);
- ``SERVER_ERROR``: every attempt answered HTTP 500 (the request may or may not have
  been applied: DynamoDB says so of its 500s);
- ``TIMEOUT``: the request could not be sent (connect timeout): surely not applied;
- ``LOST``: the request was applied, its response was lost, the SDK sent it again.

and the handling is one of:

- ``RETRY``: retried within the run's deadline (by the SDK or by jobguard), own earlier
  writes recognised (owner + run id + fence); the run goes on;
- ``UNCERTAIN``: the work item becomes ``uncertain`` (reconciled before any redo);
- ``STOP``: the run stops taking work, is recorded (``failed``/``lease_lost``) and
  releases its lease; the trigger is retried by its sender;
- ``SURFACE``: the caller gets the error (``StoreError``, a botocore error) and nothing
  was half-written; the sender (Lambda's retry, SQS redelivery, the operator) retries.

Each site also says what AWS authorizes it by, so that IAM is derived from the code
(:meth:`CallSite.iam_actions`): the IAM actions of its call (one per action type inside
a transaction: AWS authorizes each separately), the resource they act on
(:class:`Target`), and the code paths that make it (:class:`Path`). A function's role is
the union over the paths it runs (:func:`required_actions`); ``tests/infra/test_iam``
compares that with every synthesized role, both ways.

This module is tiny and imports nothing: the store modules import it at cold start.
:func:`all_sites` imports every declaring module (for tests, the README table and the
fault harness, never on the Lambda hot path).

Example:
    >>> from jobguard.callsites import all_sites
    >>> sorted(s.name for s in all_sites())[:2]  # doctest: +SKIP
    ['cli.recover.invoke', 'destination.dynamodb.put']
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CallSite", "Fault", "Handling", "Path", "Target", "all_sites", "call_site",
           "render_table", "required_actions"]


class Fault(StrEnum):
    """A fault the harness (:mod:`jobguard.faults`) can inject into one AWS call."""

    THROTTLE = "throttle"
    """``ThrottlingException`` (or ``ProvisionedThroughputExceededException``)."""
    SERVER_ERROR = "5xx"
    """HTTP 500 ``InternalServerError``: the request may have been applied."""
    TIMEOUT = "timeout"
    """A connect timeout before the request was sent: surely not applied."""
    LOST = "lost"
    """Applied, then the response was lost; the SDK retries."""


class Handling(StrEnum):
    """What jobguard does about a fault at a call site."""

    RETRY = "retry-within-deadline"
    UNCERTAIN = "mark-uncertain"
    STOP = "stop-run"
    SURFACE = "surface-to-caller"


class Path(StrEnum):
    """A code path that makes AWS calls: what a function runs decides what its role may do."""

    RUN = "run"
    """Every guarded run: a job's own run, a reconciler sweep, a recovery (the lease, the
    run records, the item ledger and checkpoint)."""
    QUEUE = "queue"
    """A run of a job whose triggers go through its trigger queue (``QUEUE``,
    ``COALESCE``): queue, defer and wake triggers."""
    QUEUED = "queued"
    """A run of a ``QUEUE`` job whose trigger became a queued message: a send that surely
    failed takes the decision back (its record deleted: the only delete a run makes). A
    ``COALESCE`` job never takes a decision back (its follow-up's decision stands)."""
    FOLLOW_UP = "follow-up"
    """A service run (the reconciler) of a queued job releasing the lease: it wakes a
    deferred trigger and sends a pending follow-up again, so the follow-up runs right
    after the sweep instead of at the next trigger."""
    CONTINUE = "continue"
    """A run of a job with ``max_chain`` above 1 handing its job to a continuation: an
    asynchronous invoke of its own function."""
    SWEEP = "sweep"
    """Reading a job's unresolved items (the sparse index, then consistent reads): the
    reconciler, recovery, and a job whose handler takes up earlier unfinished items."""
    DESTINATION = "destination"
    """jobguard's destination helpers, called by a job's own ``process``/``reconcile``;
    granted by the construct of the job's own data."""
    OPERATOR = "operator"
    """The CLI and the drills, with the operator's own credentials: never a Lambda role."""


class Target(StrEnum):
    """What a call acts on (the IAM resource)."""

    TABLE = "table"
    INDEX = "index"
    """The table's sparse ``unresolved`` index."""
    TRIGGER_QUEUE = "trigger-queue"
    DESTINATION = "destination"
    FUNCTION = "function"
    STACK = "stack"
    """The deployed stack (the CLI reads its outputs)."""


# AWS authorizes each action of a transaction separately, by the item action's own IAM
# action (a Delete inside TransactWriteItems needs dynamodb:DeleteItem).
_TRANSACTION_PARTS = {
    "TransactWriteItems": {"Update": "UpdateItem", "Put": "PutItem", "Delete": "DeleteItem",
                           "ConditionCheck": "ConditionCheckItem"},
    "TransactGetItems": {"Get": "GetItem"},
}
# Calls authorized by another action than their own name.
_AUTHORIZED_BY = {
    ("s3", "HeadObject"): ("s3:GetObject", "s3:ListBucket"),
    # ListBucket: without it S3 answers a missing object with 403, not 404, and a lost
    # put could not be told from one never made (jobguard.destinations.S3Destination).
    ("lambda", "Invoke"): ("lambda:InvokeFunction",),
}
_DEFAULT_TARGET = {"dynamodb": Target.TABLE, "sqs": Target.TRIGGER_QUEUE,
                   "s3": Target.DESTINATION, "lambda": Target.FUNCTION,
                   "cloudformation": Target.STACK}


RETRY = Handling.RETRY
UNCERTAIN = Handling.UNCERTAIN
STOP = Handling.STOP
SURFACE = Handling.SURFACE


@dataclass(frozen=True)
class CallSite:
    """One AWS call: where it is made, and how each fault is handled there.

    Attributes:
        name: stable id, e.g. ``"dynamodb.acquire"``.
        service: botocore service name (``dynamodb``, ``sqs``, ``s3``, ``lambda``).
        operation: the API operation (``UpdateItem``).
        module: the module holding the function that makes the call.
        function: its qualified name where it is defined (``LeaseRows.acquire``, the
            job store's part that holds it); the fault harness finds the site of a live
            call by this frame.
        handling: the handling of each :class:`Fault`.
        note: one line on how the handling is achieved.
        paths: the code paths that make the call.
        target: what it acts on.
        parts: for a transaction, the action types inside it (``Update``, ``Put``,
            ``Delete``, ``ConditionCheck``; ``Get``).
    """

    name: str
    service: str
    operation: str
    module: str
    function: str
    handling: dict[Fault, Handling]
    note: str
    paths: frozenset[Path] = frozenset()
    target: Target = Target.TABLE
    parts: tuple[str, ...] = ()

    def on(self, fault: Fault) -> Handling:
        return self.handling[fault]

    def iam_actions(self) -> tuple[str, ...]:
        """The IAM actions AWS checks for this call, e.g. ``("dynamodb:UpdateItem",)``."""
        if self.operation in _TRANSACTION_PARTS:
            names = _TRANSACTION_PARTS[self.operation]
            return tuple(sorted({f"{self.service}:{names[p]}" for p in self.parts}))
        return _AUTHORIZED_BY.get((self.service, self.operation),
                                  (f"{self.service}:{self.operation}",))


_SITES: dict[str, CallSite] = {}

# Modules that declare call sites (imported by all_sites()).
_DECLARING = (
    # the job store, one module per record kind (jobguard.dynamodb composes them)
    "jobguard._store_table",
    "jobguard._store_lease",
    "jobguard._store_release",
    "jobguard._store_operator",
    "jobguard._store_triggers",
    "jobguard._store_runs",
    "jobguard.dynamodb_items",
    "jobguard.triggerqueue",
    "jobguard.continuation",
    "jobguard.destinations",
    "jobguard.cli.jobs",
    "jobguard.cli.recover",
)


def call_site(name: str, service: str, operation: str, function: str, *,
              throttle: Handling, server_error: Handling, timeout: Handling, lost: Handling,
              note: str, paths: tuple[Path, ...], target: Target | None = None,
              parts: tuple[str, ...] = ()) -> CallSite:
    """Declare the call made by ``function`` (in the calling module)."""
    module = str(sys._getframe(1).f_globals["__name__"])  # noqa: SLF001 - the declaring module
    if operation in _TRANSACTION_PARTS:
        unknown = set(parts) - _TRANSACTION_PARTS[operation].keys()
        if not parts or unknown:
            raise ValueError(f"{name}: parts must name the {operation} action types, "
                             f"got {parts!r}")
    elif parts:
        raise ValueError(f"{name}: parts are for transactions only")
    if not paths:
        raise ValueError(f"{name}: paths must name the code paths that make the call")
    site = CallSite(name, service, operation, module, function,
                    {Fault.THROTTLE: throttle, Fault.SERVER_ERROR: server_error,
                     Fault.TIMEOUT: timeout, Fault.LOST: lost}, note,
                    frozenset(paths), target or _DEFAULT_TARGET[service], tuple(sorted(parts)))
    _SITES[name] = site
    return site


def all_sites() -> list[CallSite]:
    """Every declared call site, by name (imports the declaring modules)."""
    import importlib

    for module in _DECLARING:
        importlib.import_module(module)
    return [_SITES[k] for k in sorted(_SITES)]


def required_actions(paths: set[Path] | frozenset[Path], target: Target) -> tuple[str, ...]:
    """The IAM actions on ``target`` of every call site a function running ``paths``
    makes, sorted.

    Example:
        >>> required_actions({Path.SWEEP}, Target.INDEX)
        ('dynamodb:Query',)
    """
    return tuple(sorted({action for site in all_sites() if site.target is target
                         and site.paths & set(paths) for action in site.iam_actions()}))


def render_table() -> str:
    """The README's call-site table (markdown), generated from the declarations."""
    faults = list(Fault)
    lines = [
        "| call site | AWS call | " + " | ".join(f.value for f in faults) + " | how |",
        "|---|---|" + "---|" * len(faults) + "---|",
    ]
    for site in all_sites():
        cells = " | ".join(site.on(f).value for f in faults)
        lines.append(f"| `{site.name}` | {site.service} `{site.operation}` | {cells} | "
                     f"{site.note} |")
    return "\n".join(lines)
