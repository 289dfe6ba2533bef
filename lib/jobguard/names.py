"""Job names: what a job may be called (private to config and environment, which both
check names; kept apart so neither imports the other)."""

from __future__ import annotations

import re

from .errors import ConfigError

__all__ = ["JOB_NAME_PATTERN", "validate_job_name"]

#: Job names become part of DynamoDB keys (``JOB#<name>``) and SQS group ids, so the
#: key delimiter ``#`` and anything outside this set is refused.
JOB_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def validate_job_name(name: object, *, field_name: str = "name") -> str:
    """Return ``name`` if it is a valid job name, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not JOB_NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            field_name,
            f"job name {name!r} must be 1-64 characters of letters, digits, '_', '.', '-' "
            "and start with a letter or digit ('#' is the key delimiter)",
        )
    return name
