"""The testing kit: your guarded handler on an in-process AWS, driven like AWS would.

Install ``jobguard[testing]``; its pytest plugin (:mod:`jobguard.pytest_plugin`) gives
the fixtures ``jobguard_sandbox`` (a :class:`Sandbox`), ``lambda_context`` and
``manual_clock``. Without pytest, use :meth:`Sandbox.start` as a context manager.

A :class:`Sandbox` is the embedded emulator (moto, every DynamoDB request serialized,
so conditional writes are atomic as on AWS) with the jobguard table created and
``JOBGUARD_TABLE`` set. :meth:`Sandbox.wire` takes your handler (a ``@guarded``
function or a ``BatchJob``) and returns a :class:`WiredJob` bound to that table, to
the job's own SQS FIFO trigger queue (created for ``QUEUE`` and ``COALESCE`` jobs) and
to the sandbox's :class:`ManualClock`. The wired job delivers what AWS delivers: a
Scheduler tick (:meth:`WiredJob.tick`), concurrent duplicate deliveries
(:meth:`WiredJob.duplicates`), a tick that arrives while a run holds the lease
(:meth:`WiredJob.holding`), and the trigger queue's messages through an SQS event
source mapping, once or redelivered (:meth:`WiredJob.deliver_queued`). What it left
behind is read back from the table: :meth:`WiredJob.runs`, :meth:`WiredJob.lease`,
:meth:`WiredJob.item`.

Import every name from ``jobguard.testing``: the kit's parts (the clock, what an
invocation is handed, the sandbox, the wired job) are modules of their own, and this one
is the kit's front.

Example:
    >>> from datetime import timedelta
    >>> clock = ManualClock()
    >>> before = clock.now()
    >>> clock.advance(timedelta(minutes=6))  # every lease of 5 minutes has expired
    >>> clock.now() - before
    datetime.timedelta(seconds=360)
"""

from __future__ import annotations

from .clock import ManualClock
from .invocation import LambdaContext, tick_event
from .job import Held, WiredJob
from .sandbox import Sandbox

__all__ = ["Held", "LambdaContext", "ManualClock", "Sandbox", "WiredJob", "tick_event"]
