"""The smallest Powertools-idempotent handler keyed on the scheduled time: the usual
alternative. The table comes from ``IDEMPOTENCY_TABLE``.

``DynamoDBPersistenceLayer`` builds its boto3 client here, at import; jobguard builds
its client at the first invocation. Compare ``total_ms``, not the parts.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(event_key_jmespath="scheduled_at")


@idempotent(persistence_store=persistence, config=config)
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    return {"ok": True}
