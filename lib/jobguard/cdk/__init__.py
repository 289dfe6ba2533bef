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
- :class:`JobGuardDashboard`: one dashboard, alarm states then a few rows per job.
"""

try:
    import aws_cdk  # noqa: F401 - the construct library this package needs
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("jobguard.cdk needs the CDK construct library: "
                      "pip install 'jobguard[cdk]'") from exc

from .bundle import Dependencies, LambdaBundle
from .dashboard import JobGuardDashboard
from .guarded_job import GuardedJob
from .reconciler import Reconciler
from .recovery import RecoveryFunction
from .table import JobTable

__all__ = [
    "Dependencies",
    "GuardedJob",
    "JobGuardDashboard",
    "JobTable",
    "LambdaBundle",
    "Reconciler",
    "RecoveryFunction",
]
