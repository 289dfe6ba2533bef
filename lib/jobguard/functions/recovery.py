"""The recovery Lambda: plan (dry run, the default) or execute a bounded recovery.

Invoke it with a recovery request, e.g.
``{"job": "crm-sync", "cursor_from": "000100", "cursor_to": "000400"}``; pass the
returned token as ``confirm`` with ``"dry_run": false`` to execute. The jobs it knows
are the ones registered by the modules in ``JOBGUARD_RECOVERY_MODULES``.
"""

from __future__ import annotations

from typing import Any

from .. import registry
from ..errors import InvalidRequestError, JobGuardError, LeaseBusyError
from ..recovery import recover

_loaded: list[str] = []


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    if not _loaded:
        _loaded.extend(registry.load_from_environment())
    try:
        return recover(event, context=context)
    except InvalidRequestError as exc:
        return {"result": "refused", "field": exc.field, "error": str(exc)}
    except LeaseBusyError as exc:
        return {"result": "busy", "holder_run_id": exc.holder_run_id,
                "lease_expires_at_ms": exc.lease_expires_at_ms, "error": str(exc)}
    except JobGuardError as exc:
        field = getattr(exc, "field", None)
        return {"result": "refused", "field": field, "error": str(exc)}
