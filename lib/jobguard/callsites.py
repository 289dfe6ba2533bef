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

__all__ = ["CallSite", "Fault", "Handling", "all_sites", "call_site", "render_table"]


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
        function: its qualified name (``DynamoJobStore.acquire``); the fault harness
            finds the site of a live call by this frame.
        handling: the handling of each :class:`Fault`.
        note: one line on how the handling is achieved.
    """

    name: str
    service: str
    operation: str
    module: str
    function: str
    handling: dict[Fault, Handling]
    note: str

    def on(self, fault: Fault) -> Handling:
        return self.handling[fault]


_SITES: dict[str, CallSite] = {}

# Modules that declare call sites (imported by all_sites()).
_DECLARING = (
    "jobguard.dynamodb",
    "jobguard.dynamodb_items",
    "jobguard.triggerqueue",
    "jobguard.destinations",
    "jobguard.cli",
)


def call_site(name: str, service: str, operation: str, function: str, *,
              throttle: Handling, server_error: Handling, timeout: Handling, lost: Handling,
              note: str) -> CallSite:
    """Declare the call made by ``function`` (in the calling module)."""
    module = str(sys._getframe(1).f_globals["__name__"])  # noqa: SLF001 - the declaring module
    site = CallSite(name, service, operation, module, function,
                    {Fault.THROTTLE: throttle, Fault.SERVER_ERROR: server_error,
                     Fault.TIMEOUT: timeout, Fault.LOST: lost}, note)
    _SITES[name] = site
    return site


def all_sites() -> list[CallSite]:
    """Every declared call site, by name (imports the declaring modules)."""
    import importlib

    for module in _DECLARING:
        importlib.import_module(module)
    return [_SITES[k] for k in sorted(_SITES)]


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
