"""CDK context the constructs read themselves, so a user's app needs no code for it.

``-c jobguard:local=true`` (``cdk deploy`` into the local AWS): :class:`LambdaBundle`
builds host-platform wheels, :class:`GuardedJob` and :class:`Reconciler` create their
schedules disabled (the local AWS fires schedules with ``<aws.scheduler.scheduled-time>``
left literal, which jobguard rightly refuses as a tick; the drills deliver ticks
themselves), and e-mail alarm destinations subscribe nobody.
"""

from __future__ import annotations

from typing import Any

from constructs import Construct

from jobguard.errors import ConfigError

LOCAL = "jobguard:local"


def flag(value: Any, key: str) -> bool:
    """A context flag: true/false, 1/0, yes/no (absent: false); anything else refused."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ConfigError(key, f"{value!r} is not true or false")


def local_deployment(scope: Construct) -> bool:
    """Whether the app is synthesized for the local AWS (``-c jobguard:local=true``)."""
    return flag(scope.node.try_get_context(LOCAL), LOCAL)
