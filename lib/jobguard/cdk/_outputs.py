"""The stack outputs the operator's tools read (:mod:`jobguard.deployment`): one of each
per stack, or per job; a second is refused in one line, before anything is built (the
CDK's own refusal is a jsii traceback: "There is already a Construct with name ...")."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from jobguard.errors import ConfigError

OWNER = "jobguard_owner"
"""The attribute a jobguard output carries: what made it, for the refusal to name."""


def check_free(scope: Construct, key: str, *, field: str, what: str) -> None:
    """Refuse ``what`` (e.g. ``job 'crm_sync'``) when the stack of ``scope`` has the
    output ``key`` already, naming what made it (``field`` names the option)."""
    stack = Stack.of(scope)
    taken = stack.node.try_find_child(key)
    if taken is None:
        return
    other = getattr(taken, OWNER, None)
    said = (f"{other} has it already" if other is not None
            else "the stack has an output by that name already")
    raise ConfigError(field, f"{what}: its stack output {key} is one per stack "
                      f"{stack.stack_name!r}, and {said}")


def mark(output: object, owner: str) -> None:
    setattr(output, OWNER, owner)
