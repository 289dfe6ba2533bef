"""A stand-in for the Lambda context object (standard library only, cheap to import).

Powertools' ``@idempotent`` reads ``get_remaining_time_in_millis()``; jobguard reads
``aws_request_id`` for manual triggers.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class FakeLambdaContext:
    function_name: str = "bench"
    memory_limit_in_mb: int = 128
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timeout_ms: int = 900_000

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_ms
