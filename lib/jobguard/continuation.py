"""The continuation invoke: a run that hands its job on starts the next link by an
asynchronous invoke of its own function (``InvocationType=Event``).

The hand-off is written first (:meth:`jobguard.dynamodb.DynamoJobStore.hand_off`); the
invoke second. An invoke refused outright (a 4xx answer: no permission, no such
function, throttled) raises :class:`~jobguard.errors.ContinuationRefused`, and the link
withdraws its hand-off at once; one whose fate is unknown (a 5xx, no answer) leaves the
hand-off to expire like a lease. Either way the next trigger takes the job over from the
checkpoint, nothing done twice. A
duplicate delivery finds the link running (``duplicate``), a late one the hand-off gone
(``superseded``). Imported only when a run hands off (not on the cold path).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .callsites import SURFACE, Path, call_site
from .errors import ConfigError, ContinuationRefused, StoreError

__all__ = ["LambdaContinuation", "function_name"]

CONTINUE = call_site(
    "lambda.continue", "lambda", "Invoke", "LambdaContinuation.send",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=SURFACE,
    note="after the hand-off is written; an invoke refused outright (4xx) withdraws the "
         "hand-off at once, one of unknown fate leaves it to expire like a lease; then the "
         "next trigger takes over from the checkpoint; a repeated one is a duplicate of "
         "the link",
    paths=(Path.CONTINUE,),
)


def function_name() -> str | None:
    """The function this code runs in (Lambda sets ``AWS_LAMBDA_FUNCTION_NAME``)."""
    return os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or None


class LambdaContinuation:
    """Invoke ``function`` asynchronously with a continuation event."""

    def __init__(self, function: str, *, client: Any | None = None) -> None:
        if not function:
            raise ConfigError("AWS_LAMBDA_FUNCTION_NAME", "is required to continue a chain")
        self.function = function
        self._client = client

    def send(self, event: dict[str, Any]) -> None:
        client = self._client
        if client is None:
            from ._clients import client as make

            client = self._client = make("lambda")
        try:
            client.invoke(FunctionName=self.function, InvocationType="Event",
                          Payload=json.dumps(event).encode())
        except Exception as exc:  # noqa: BLE001 - named; the guard withdraws or waits
            kind = ContinuationRefused if _refused(exc) else StoreError
            raise kind("continue", str(event.get("job")), str(exc)[:300]) from exc


def _refused(exc: Exception) -> bool:
    """A 4xx answer says the event was not queued; anything else (a 5xx, no answer) may
    have queued it: the hand-off is then left to expire so that a queued continuation still
    runs its link (withdrawing would be as safe, every write being conditioned on the row,
    but would end a live chain early)."""
    response = getattr(exc, "response", None)
    meta = response.get("ResponseMetadata") if isinstance(response, dict) else None
    status = meta.get("HTTPStatusCode") if isinstance(meta, dict) else None
    return isinstance(status, int) and 400 <= status < 500
