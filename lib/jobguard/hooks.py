"""Named hook points: deterministic pauses for tests and drills, never sleeps.

Production code calls :func:`fire` at a few named points; with no hook registered it
costs one dict lookup. Tests register a callback for a point, typically one that
waits on a ``threading.Event`` so a race can be staged exactly.

Points fired by jobguard:

- ``after_acquire`` (job, run_id, fence): the lease was just acquired.
- ``before_release`` (job, run_id, fence): the handler returned, release is next.
- ``before_renew`` (job, run_id, fence, waited_s): a heartbeat is about to renew, after
  waiting ``waited_s`` seconds (:func:`jobguard.run.next_wait`).
- ``lease_lost`` (job, run_id, fence, reason): the heartbeat gave the lease up (renewal
  refused, or the local deadline passed without a confirmed renewal).
- ``after_claim`` (job, run_id, work_ids): a BatchJob claimed a page.
- ``before_item`` (job, run_id, work_id): before the lease and claim checks that
  precede a destination call.
- ``after_process`` (job, run_id, work_id): the destination answered; the outcome is
  not recorded yet.
- ``after_lease_read`` (job, trigger_id): a trigger has a view of the lease (its first
  read, or a refused acquisition's ALL_OLD), before it decides and records from it.
- ``before_destination`` (job, run_id, work_id): a destination helper
  (:mod:`jobguard.destinations`) is about to write the work item's effect, so a drill
  can fail, pause or crash the call there. Handlers fire nothing themselves.

A fire site below the runtime (a destination helper) names the run it is called in
through :func:`active_run`: the runtime provides the lookup (:func:`provide_run`, wired
when the package loads), so no adapter imports the runtime.

Example:
    >>> import threading
    >>> from jobguard import hooks
    >>> gate = threading.Event()
    >>> with hooks.on("after_acquire", lambda **ctx: gate.wait(5)):
    ...     pass  # a run started here pauses right after acquiring its lease
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["active_run", "add", "fire", "on", "provide_run"]

Hook = Callable[..., Any]
_hooks: dict[str, list[Hook]] = {}
_lock = threading.Lock()
_run_lookup: Callable[[], Any] | None = None


def fire(point: str, **context: Any) -> None:
    """Call every hook registered for ``point`` with ``context`` as keywords."""
    callbacks = _hooks.get(point)
    if not callbacks:
        return
    for callback in list(callbacks):
        callback(**context)


def add(point: str, callback: Hook) -> None:
    """Register ``callback`` for ``point`` for the life of the process (drill switches)."""
    with _lock:
        _hooks.setdefault(point, []).append(callback)


@contextmanager
def on(point: str, callback: Hook) -> Iterator[None]:
    """Register ``callback`` for ``point`` while the ``with`` block runs."""
    with _lock:
        _hooks.setdefault(point, []).append(callback)
    try:
        yield
    finally:
        with _lock:
            _hooks[point].remove(callback)
            if not _hooks[point]:
                del _hooks[point]


def provide_run(lookup: Callable[[], Any]) -> None:
    """Set how :func:`active_run` finds the run of the executing context
    (``jobguard.run.active_run``: ``jobguard`` wires it when it loads)."""
    global _run_lookup
    _run_lookup = lookup


def active_run() -> Any:
    """The run of the guarded handler executing in this context (it has ``job`` and
    ``run_id``), or None outside one (or before the runtime provided its lookup)."""
    return _run_lookup() if _run_lookup is not None else None
