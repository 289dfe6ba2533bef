"""The recovery Lambda: plan (dry run, the default) or execute a bounded recovery.

Invoke it with a recovery request, e.g.
``{"job": "crm-sync", "cursor_from": "000100", "cursor_to": "000400"}``; pass the
returned token as ``confirm`` with ``"dry_run": false`` to execute. The jobs it knows
are the ones registered by the modules in ``JOBGUARD_RECOVERY_MODULES``.

Who may execute is IAM's to say, not the token's (anyone who may plan gets a token): an
execution is refused unless it was invoked through the function's ``execute`` alias
(:data:`jobguard.recovery.EXECUTE_ALIAS`), which the invocation's ARN names
(``context.invoked_function_arn`` ends in ``:execute``). Lambda authorizes an invoke of
``function:NAME:execute`` only on a grant of that ARN (a grant of the function's own
ARN does not cover it), so the stack lets planners invoke the function and executors
its alias (:class:`jobguard.cdk.RecoveryFunction`).
"""

from __future__ import annotations

from typing import Any

from .. import registry
from ..errors import InvalidRequestError, JobGuardError, LeaseBusyError
from ..recovery import EXECUTE_ALIAS, parse_request, recover

_loaded: list[str] = []


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    if not _loaded:
        _loaded.extend(registry.load_from_environment())
    try:
        if not parse_request(event).dry_run:
            _check_execute_path(context)
        return recover(event, context=context)
    except InvalidRequestError as exc:
        return {"result": "refused", "field": exc.field, "error": str(exc)}
    except LeaseBusyError as exc:
        return {"result": "busy", "holder_run_id": exc.holder_run_id,
                "lease_expires_at_ms": exc.lease_expires_at_ms, "error": str(exc)}
    except JobGuardError as exc:
        field = getattr(exc, "field", None)
        return {"result": "refused", "field": field, "error": str(exc)}


def invoked_qualifier(context: Any) -> str | None:
    """The alias or version this invocation named (``function:NAME:QUALIFIER``), or None:
    the function itself, or no Lambda context at all.

    Example:
        >>> class Context:
        ...     invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:r:execute"
        >>> invoked_qualifier(Context())
        'execute'
    """
    arn = getattr(context, "invoked_function_arn", None)
    if not isinstance(arn, str):
        return None
    parts = arn.split(":")
    if len(parts) == 8 and parts[0] == "arn" and parts[5] == "function" and parts[7]:
        return parts[7]
    return None


def _check_execute_path(context: Any) -> None:
    """An execution must come through the ``execute`` alias: the token confirms a plan,
    it is no permission (whoever may plan has one)."""
    qualifier = invoked_qualifier(context)
    if qualifier == EXECUTE_ALIAS:
        return
    named = ("the function itself" if qualifier is None
             else f"the function's {qualifier!r} qualifier")
    raise InvalidRequestError(
        "dry_run", f"an execution (dry_run false) is refused here: this invocation named "
        f"{named}, which may only plan. Execute through the function's {EXECUTE_ALIAS!r} "
        f"alias (invoke FUNCTION:{EXECUTE_ALIAS}, as `jobguard recover --execute` does), "
        "which IAM grants to those who may execute; a plan's token confirms a plan, it "
        "permits nothing")
