"""The smallest guarded handler: what a jobguard user deploys.

The table comes from ``JOBGUARD_TABLE`` (set by the benchmark, as by the stack in AWS).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobguard import OverlapPolicy, guarded


@guarded("bench-cold", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=5))
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    return {"ok": True}
