"""Small text helpers for descriptions and runbook text."""

from __future__ import annotations

import re
from datetime import timedelta


def human(value: timedelta) -> str:
    """``timedelta(minutes=5)`` -> ``"5 minutes"`` (the largest whole unit)."""
    total = int(value.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if total >= size and total % size == 0:
            count = total // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{total} second{'s' if total != 1 else ''}"


def pascal(name: str) -> str:
    """A construct id from a job name: ``crm-sync`` -> ``CrmSync``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_.]", name) if part)


def module_of(handler: str) -> str:
    """``handlers.crm_sync.lambda_handler`` -> ``handlers.crm_sync``."""
    return handler.rsplit(".", 1)[0]
