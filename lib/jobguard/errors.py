"""Exceptions: one root, specific subclasses that carry their context as attributes.

Busy is not an error: a trigger that finds the lease held gets a result
(:class:`jobguard.Outcome`), never an exception. Faults raise.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CursorTooLargeError",
    "DamagedRowError",
    "InvalidRequestError",
    "LeaseBusyError",
    "InvalidTriggerError",
    "NewerMessageError",
    "JobGuardError",
    "LeaseLostError",
    "SendError",
    "StoreError",
]


class JobGuardError(Exception):
    """Root of every exception jobguard raises."""


class ConfigError(JobGuardError, ValueError):
    """A job definition or environment variable that cannot be safe.

    Attributes:
        field: the offending field, e.g. ``"heartbeat_every"`` or ``"JOBGUARD_TABLE"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidTriggerError(JobGuardError, ValueError):
    """An event that is not a trigger this job accepts. Nothing was written.

    Attributes:
        field: the offending field of the event, e.g. ``"scheduled_at"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class NewerMessageError(InvalidTriggerError):
    """A trigger-queue message written by a newer jobguard (its ``jobguard`` version is
    above the one this one writes): not garbage, a trigger this worker cannot read. It
    is left on the queue for a worker that can (a deployment under way), never recorded
    ``rejected`` and deleted.

    Attributes:
        version: the message's ``jobguard`` version.
    """

    def __init__(self, version: int, readable: int) -> None:
        self.version = version
        super().__init__("body.jobguard", f"version {version} was written by a newer "
                         f"jobguard than this worker's (which reads {readable}); left on "
                         "the queue for a worker that reads it")


class LeaseLostError(JobGuardError):
    """The run no longer holds its job's lease and must commit nothing more.

    Raised by :meth:`jobguard.Run.ensure_lease` once a renewal failed, the lease was
    taken over (a higher fence exists), or the local deadline passed.

    Attributes:
        job: the job name.
        run_id: the run that lost the lease.
        fence: the fence this run held.
        reason: why the lease is considered lost.
    """

    def __init__(self, job: str, run_id: str, fence: int, reason: str) -> None:
        self.job = job
        self.run_id = run_id
        self.fence = fence
        self.reason = reason
        super().__init__(f"job {job!r}: run {run_id} (fence {fence}) lost its lease: {reason}")


class StoreError(JobGuardError):
    """A storage backend failed in a way jobguard could not resolve.

    Attributes:
        operation: the storage operation, e.g. ``"acquire"``.
        job: the job name.
    """

    def __init__(self, operation: str, job: str, message: str) -> None:
        self.operation = operation
        self.job = job
        super().__init__(f"{operation} for job {job!r}: {message}")


class ContinuationRefused(StoreError):
    """The invoke of a chain's next link was refused (an HTTP 4xx answer: no permission,
    no such function, throttled): surely not queued, so no continuation will come. The
    link withdraws its hand-off at once instead of holding the job until it expires."""


class CursorTooLargeError(JobGuardError, ValueError):
    """A checkpoint cursor over :data:`jobguard._bounds.MAX_CURSOR_BYTES`: refused before
    the page it follows is claimed (nothing written, no destination called).

    Attributes:
        job: the job name.
        size_bytes: the cursor's size (UTF-8).
        limit_bytes: the bound.
    """

    def __init__(self, job: str, size_bytes: int, limit_bytes: int) -> None:
        self.job = job
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        super().__init__(
            f"job {job!r}: the checkpoint's cursor (next_cursor) is {size_bytes:,} bytes, "
            f"over the bound of {limit_bytes:,}: it lives on the job row beside the open "
            "claim, which every commit and lease acquisition pays for by its size; "
            "checkpoint a shorter position (an offset, a key)")


class SendError(StoreError):
    """A trigger message could not be sent to the job's trigger queue.

    Attributes:
        maybe_applied: True when the queue may have taken it anyway (the response was
            lost, a timeout after sending, a 5xx); False when it surely did not
            (throttled, refused, never sent).
    """

    def __init__(self, job: str, message: str, *, maybe_applied: bool) -> None:
        self.maybe_applied = maybe_applied
        super().__init__("send_trigger", job, message)


class DamagedRowError(StoreError):
    """A row jobguard wrote holds an attribute of the wrong type, or lacks one it needs
    (edited by hand, restored from an old backup, written by a bug). Nothing is decided
    from it: the error names the row, the attribute and the command that repairs it.

    Attributes:
        row: the row's sort key, e.g. ``"LEASE"``.
        attribute: the damaged attribute, e.g. ``"expires_at_ms"``.
        repair: the command that repairs it, e.g. ``"jobguard release --force crm-sync"``.
    """

    def __init__(self, job: str, row: str, attribute: str, problem: str, repair: str) -> None:
        self.row = row
        self.attribute = attribute
        self.repair = repair
        super().__init__("read", job, f"row {row} is damaged: {attribute} {problem}; "
                         f"repair it with `{repair}`")


class InvalidRequestError(JobGuardError, ValueError):
    """A recovery request or command that cannot be carried out. Nothing was written.

    Attributes:
        field: the offending field, e.g. ``"cursor_to"`` or ``"confirm"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class LeaseBusyError(JobGuardError):
    """Another run held the job's lease for longer than the caller would wait.

    Attributes:
        job: the job name.
        holder_run_id: the run holding the lease.
        lease_expires_at_ms: when its lease ends unless renewed (epoch ms).
        paused_reason: set when the job is paused instead.
    """

    def __init__(self, job: str, holder_run_id: str | None, lease_expires_at_ms: int | None,
                 paused_reason: str | None = None) -> None:
        self.job = job
        self.holder_run_id = holder_run_id
        self.lease_expires_at_ms = lease_expires_at_ms
        self.paused_reason = paused_reason
        if lease_expires_at_ms is None:
            until = "an unknown time"
        else:
            from datetime import UTC, datetime

            until = datetime.fromtimestamp(lease_expires_at_ms / 1000, tz=UTC).strftime(
                "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        what = (f"paused ({paused_reason})" if paused_reason is not None
                else f"held by run {holder_run_id} until {until}")
        super().__init__(f"job {job!r} is {what}; try again after it ends")
