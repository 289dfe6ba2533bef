"""The active run, as the handler sees it, and its heartbeat.

The heartbeat renews the lease in a background thread. The worker never trusts the
lease row alone: it keeps a local deadline on its monotonic clock, set from the moment
the last confirmed renewal was *sent* (last confirmed renewal + lease - skew margin).
Past that deadline, or once a renewal is refused, :meth:`Run.ensure_lease` raises and
the run must commit nothing more.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from ._bounds import check_batch_size
from .clock import Clock, to_ms
from .errors import JobGuardError, LeaseLostError, StoreError
from .hooks import fire
from .triggers import Trigger

__all__ = ["Heartbeat", "Run", "active_run", "current_run"]

_current: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "jobguard_run", default=None
)


class _LeaseStore(Protocol):
    def renew(self, job: str, *, run_id: str, fence: int, now_ms: int, lease_ms: int) -> bool: ...

    def read_lease(self, job: str) -> Any: ...


def next_wait(renewed: bool, remaining_s: float, every_s: float) -> float:
    """Seconds a heartbeat waits before its next renewal, ``remaining_s`` before its local
    deadline.

    Renewed (or not yet tried): a full interval ``every_s``, never past the deadline (0 once
    it has passed, so the lost lease is noticed at once). Unresolved (throttled, timed out,
    its answer lost): retry soon, after a quarter of what is left, at most 1 s, at least
    10 ms, so a few retries fit before the deadline without spinning.
    """
    if renewed:
        return min(every_s, max(0.0, remaining_s))
    return max(0.01, min(1.0, remaining_s / 4))


class Heartbeat:
    """Renews one run's lease every ``every`` until stopped or lost."""

    def __init__(
        self,
        *,
        store: _LeaseStore,
        job: str,
        run_id: str,
        fence: int,
        lease: timedelta,
        every: timedelta,
        skew_margin: timedelta,
        clock: Clock,
        acquired_monotonic: float,
    ) -> None:
        self._store = store
        self._job = job
        self._run_id = run_id
        self._fence = fence
        self._lease_s = lease.total_seconds()
        self._every_s = every.total_seconds()
        self._skew_s = skew_margin.total_seconds()
        self._clock = clock
        self._deadline = acquired_monotonic + self._lease_s - self._skew_s
        self._stop = threading.Event()
        self._lost_reason: str | None = None
        self._thread: threading.Thread | None = None
        self.renewals = 0

    @property
    def deadline(self) -> float:
        """Monotonic time after which this worker must assume the lease is gone."""
        return self._deadline

    @property
    def lost_reason(self) -> str | None:
        if self._lost_reason is None and self._clock.monotonic() >= self._deadline:
            self._lost_reason = "local lease deadline passed without a confirmed renewal"
        return self._lost_reason

    def start(self) -> Heartbeat:
        self._thread = threading.Thread(
            target=self._loop, name=f"jobguard-heartbeat-{self._job}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        wait_s = next_wait(True, self._deadline - self._clock.monotonic(), self._every_s)
        while not self._stop.wait(wait_s):
            if self.lost_reason is not None:
                self._lost()
                return
            fire("before_renew", job=self._job, run_id=self._run_id, fence=self._fence,
                 waited_s=wait_s)
            if self._stop.is_set():
                return
            outcome = self.renew_once()
            if outcome is False:
                self._lost()
                return
            remaining = self._deadline - self._clock.monotonic()
            wait_s = next_wait(outcome is True, remaining, self._every_s)

    def _lost(self) -> None:
        fire("lease_lost", job=self._job, run_id=self._run_id, fence=self._fence,
             reason=self._lost_reason)

    def renew_once(self) -> bool | None:
        """One renewal. True renewed, False lost, None unresolved (retry later)."""
        sent = self._clock.monotonic()
        now_ms = to_ms(self._clock.now())
        lease_ms = int(self._lease_s * 1000)
        renewed: bool | None
        try:
            renewed = self._store.renew(
                self._job, run_id=self._run_id, fence=self._fence, now_ms=now_ms,
                lease_ms=lease_ms,
            )
        except StoreError:
            renewed = self._resolve(now_ms + lease_ms)
            if renewed is None:
                return None
        except Exception:  # noqa: BLE001 - network errors surface as botocore exceptions
            renewed = self._resolve(now_ms + lease_ms)
            if renewed is None:
                return None
        if not renewed:
            self._lost_reason = "renewal refused: the lease was taken over or released"
            return False
        if sent + self._lease_s - self._skew_s > self._deadline:
            self._deadline = sent + self._lease_s - self._skew_s
        self.renewals += 1
        return True

    def _resolve(self, expected_expiry_ms: int) -> bool | None:
        """After an ambiguous renewal, look at the row (consistent read)."""
        try:
            state = self._store.read_lease(self._job)
        except Exception:  # noqa: BLE001
            return None
        if state.run_id != self._run_id or state.fence != self._fence:
            return False
        if state.expires_at_ms == expected_expiry_ms:
            return True  # our write landed; its response was lost
        return None


@dataclass(eq=False)
class Run:
    """The active run of a guarded handler. Get it with :func:`current_run`.

    Example:
        >>> from jobguard import current_run
        >>> def lambda_handler(event, context):  # inside @guarded
        ...     run = current_run()
        ...     for record in page:
        ...         run.ensure_lease()   # raises LeaseLostError once the lease is gone
        ...         send(record)
    """

    job: str
    run_id: str
    trigger: Trigger
    fence: int
    owner: str
    heartbeat: Heartbeat = field(repr=False)
    clock: Clock = field(repr=False)
    services: Any = field(default=None, repr=False)
    """Store, config and telemetry of the guarded job (internal)."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Figures written on this run's record when it ends (counts, cursor range)."""
    continue_requested: bool = False
    """Set by :class:`jobguard.BatchJob` when the run stops for time: hand the job to a
    continuation run when it ends (honoured while ``JobConfig.max_chain`` allows)."""
    _claims: Any = field(default=None, repr=False)

    @property
    def lease_lost(self) -> bool:
        return self.heartbeat.lost_reason is not None

    def ensure_lease(self) -> None:
        """Raise :class:`LeaseLostError` if this run may no longer write."""
        reason = self.heartbeat.lost_reason
        if reason is not None:
            raise LeaseLostError(self.job, self.run_id, self.fence, reason)

    def claim(
        self,
        records: Iterable[Any],
        *,
        work_id: Callable[[Any], Any],
        reconcile: Callable[[Any, Any], str | None] | None = None,
        batch_size: int | None = None,
    ) -> Iterator[Any]:
        """Claim each record's work item; yield those that still need work.

        Completed items are skipped (and counted), uncertain ones are reconciled first
        with ``reconcile(record, item_record)`` (without it they stay uncertain and are
        skipped). Each yielded :class:`jobguard.ClaimedItem` needs one outcome.

        Example:
            >>> run = current_run()  # doctest: +SKIP
            >>> for item in run.claim(contacts, work_id=lambda c: WorkId(c["id"], "create-note")):
            ...     with item:
            ...         item.complete(destination_id=notes.put(item.key, item.record))

        Raises:
            ConfigError: ``batch_size`` is not an integer 1-1000 (nothing claimed).
        """
        if batch_size is not None:
            check_batch_size(batch_size)  # refused here, before any claim or read
        claims = self.work_claims(reconcile=reconcile)
        items: Iterator[Any] = claims.iterate(records, work_id, batch_size=batch_size)
        return items

    def work_claims(self, *, reconcile: Callable[[Any, Any], str | None] | None = None) -> Any:
        """The claim engine of this run (one per run)."""
        if self._claims is None:
            from .claims import WorkClaims

            self._claims = WorkClaims(self, self.services.items, self.services.config,
                                      self.services.telemetry, reconcile=reconcile)
        elif reconcile is not None:
            self._claims.reconcile = reconcile
        return self._claims

    def telemetry_count(self, name: str, value: float = 1) -> None:
        if self.services is not None:
            self.services.telemetry.count(name, value)

    def figures(self) -> dict[str, Any]:
        """Counts and cursor range of the run's work items, for its record (also when
        the run ended by an error before :meth:`close`)."""
        if self._claims is not None and not self.stats:
            self.stats.update(self._claims.report.as_dict())
        return {k: v for k, v in self.stats.items() if isinstance(v, int | str | bool)}

    def close(self, error: Exception | None = None) -> None:
        """End the run's work items and put their figures on the run record.

        Every claimed item gets an outcome and what is recorded is written, the
        checkpoint with it, while the lease is held: also when the handler raised
        (``error``), since what the run finished is true whatever happens next. A
        failure to write then is logged and said on the record; the handler's error
        stays the run's. A run that lost its lease writes nothing."""
        if self._claims is None:
            return
        if self.lease_lost:
            self._claims.abandon()
        elif error is None:
            self._claims.close()
        else:
            try:
                self._claims.close(error)
            except Exception as exc:  # noqa: BLE001 - the handler's error is the run's
                if self.services is not None:
                    from ._redact import error_text, redacted

                    self.services.telemetry.logger.warning(
                        "outcomes not written after the handler failed",
                        extra={"error": redacted(error_text(exc), getattr(
                            self.services.config, "redact", None))})
        self.stats.update(self._claims.report.as_dict())

    def end_unwritten(self, error: BaseException) -> None:
        """The process is ending (not an error a run records): nothing more is written,
        and the record does not count completions that were not."""
        if self._claims is not None:
            self._claims.end_unwritten(error)
            self.stats.update(self._claims.report.as_dict())

    def abandon(self) -> None:
        """The lease is lost: the run's work items write nothing more, now or later."""
        if self._claims is not None:
            self._claims.abandon()


def current_run() -> Run:
    """The run of the guarded handler executing in this context.

    Raises:
        JobGuardError: outside a guarded handler.
    """
    run = _current.get()
    if run is None:
        raise JobGuardError("current_run() called outside a guarded handler")
    return run


def active_run() -> Run | None:
    """The run of the guarded handler executing in this context, or None outside one."""
    return _current.get()


def _set_current(run: Run | None) -> contextvars.Token[Run | None]:
    return _current.set(run)


def _reset_current(token: contextvars.Token[Run | None]) -> None:
    _current.reset(token)
