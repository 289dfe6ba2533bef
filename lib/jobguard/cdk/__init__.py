"""Reusable jobguard constructs: import them into your own CDK app
(``pip install 'jobguard[cdk]'``).

- :class:`JobTable`: the DynamoDB table (keys, TTL, PITR, encryption, the ``unresolved``
  index), retained on stack deletion;
- :class:`LambdaBundle`: the code asset (jobguard + your handlers) and the dependency
  layer, built without Docker;
- :class:`GuardedJob`: a job's function, schedule (bounded retries + DLQ), FIFO trigger
  queue (+ DLQ, event source mapping) and alarms;
- :class:`Reconciler`: the scheduled reconciler of a job that asks for one;
- :class:`RecoveryFunction`: the bounded recovery Lambda, invokable only by the
  principals you name;
- :class:`JobFleet`: many jobs in nested stacks (CloudFormation's 500 resources a
  stack), watched by fleet-wide alarms and one dashboard (a fraction of the cost);
- :class:`JobGuardDashboard`: one dashboard, alarm states then a few rows per job;
- :func:`alarms_to_email`, :func:`alarms_to_topic`, :func:`alarms_off`: where the alarms
  go, which every construct that makes alarms requires (``alarms=``).

Importing it installs a ``sys.excepthook`` that prints an uncaught jobguard
:class:`~jobguard.errors.ConfigError` as one line, ``jobguard: <field>: <message>``, and
exits 1 (every other exception goes to the hook it found), so ``python app.py`` says what
to fix without a traceback.
"""

import sys
from types import TracebackType

try:
    import aws_cdk  # noqa: F401 - the construct library this package needs
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("jobguard.cdk needs the CDK construct library: "
                      "pip install 'jobguard[cdk]'") from exc

from .bundle import Dependencies, LambdaBundle
from .dashboard import JobGuardDashboard
from .destination import AlarmDestination, alarms_off, alarms_to_email, alarms_to_topic
from .fleet import JobFleet
from .guarded_job import GuardedJob
from .reconciler import Reconciler
from .recovery import RecoveryFunction
from .table import JobTable

__all__ = [
    "AlarmDestination",
    "Dependencies",
    "GuardedJob",
    "JobFleet",
    "JobGuardDashboard",
    "JobTable",
    "LambdaBundle",
    "Reconciler",
    "RecoveryFunction",
    "alarms_off",
    "alarms_to_email",
    "alarms_to_topic",
]


def _install_excepthook() -> None:
    from jobguard.errors import ConfigError

    previous = sys.excepthook
    if getattr(previous, "jobguard", False):
        return

    def hook(kind: type[BaseException], value: BaseException,
             traceback: TracebackType | None) -> None:
        if isinstance(value, ConfigError):
            print(f"jobguard: {value}", file=sys.stderr)
            return
        previous(kind, value, traceback)

    hook.jobguard = True  # type: ignore[attr-defined]
    sys.excepthook = hook


_install_excepthook()
