"""Fault injection into AWS calls, through botocore event hooks (tests, ``jobguard local``).

A :class:`Faults` harness holds rules ("throttle every ``UpdateItem`` of the lease's
acquisition, the 2nd time", "lose 10% of all responses") and, while active, attaches to:
the clients it is given, every client :func:`jobguard._clients.client` makes from then
on, and every botocore session created from then on (boto3 clients of the CLI and of
tests). Four faults (:class:`jobguard.callsites.Fault`):

- ``throttle`` and ``5xx``: every attempt of the call is answered with a throttling
  error / HTTP 500 *instead of* being sent (the SDK's retries run out, the caller sees
  the error). The request is never applied.
- ``timeout``: every attempt fails with ``ConnectTimeoutError`` before it is sent.
- ``lost``: the first attempt reaches the emulator and is applied, then the caller's
  SDK gets ``ReadTimeoutError`` and sends it again (``attempts=N``: the first N lose
  their response; N >= the SDK's attempts and the caller sees the timeout).

A rule's ``then`` gives the attempts after its first ``attempts`` a fault of their own:
``Rule(Fault.LOST, attempts=1, then=Fault.THROTTLE)`` is a write that lands unanswered
and whose retries are throttled, so the caller sees a throttle for a write that landed.

Each call is matched to its :class:`~jobguard.callsites.CallSite` by the frame of the
declared function that makes it, so a rule can name a site (``@items.claim``) and the
log says where every fault landed. Decisions are deterministic for a seed: the n-th call
of a site draws from ``Random(f"{seed}:{site}:{operation}:{n}")``.

Rule syntax (``--faults``): comma-separated ``KIND[:OPERATION][@SITE][#N|=P]``; ``KIND``
is ``throttle``, ``5xx``, ``timeout``, ``lost`` or ``any`` (one of the four, drawn);
``#N`` is the N-th matching call, ``=P`` each matching call with probability P.

Example:
    >>> from jobguard.faults import Faults
    >>> with Faults.parse("lost@dynamodb.acquire#1,throttle=0.05", seed=7) as faults:
    ...     lambda_handler(event, context)  # doctest: +SKIP
    >>> [(i.site, i.fault.value) for i in faults.injected]  # doctest: +SKIP
    [('dynamodb.acquire', 'lost')]

Only for tests and the local runner: nothing in the Lambda path imports this module.
"""

from __future__ import annotations

import json
import random
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .callsites import CallSite, Fault, all_sites

__all__ = ["Call", "Faults", "Rule", "parse_rules"]

_UNROUTABLE = "http://jobguard-fault.invalid/"
_PRE_SEND = (Fault.THROTTLE, Fault.SERVER_ERROR, Fault.TIMEOUT)
_RULE = re.compile(
    r"^(?P<kind>throttle|5xx|timeout|lost|any)(?::(?P<op>[A-Za-z*]+))?(?:@(?P<site>[\w.*-]+))?"
    r"(?:#(?P<nth>\d+)|=(?P<p>[0-9.]+))?$"
)

# Error shapes per protocol: (status, code) for a throttle and a server error.
_ERRORS = {
    "dynamodb": {Fault.THROTTLE: (400, "ThrottlingException"),
                 Fault.SERVER_ERROR: (500, "InternalServerError")},
    "sqs": {Fault.THROTTLE: (400, "RequestThrottled"),
            Fault.SERVER_ERROR: (500, "InternalFailure")},
    "s3": {Fault.THROTTLE: (503, "SlowDown"), Fault.SERVER_ERROR: (500, "InternalError")},
    "lambda": {Fault.THROTTLE: (429, "TooManyRequestsException"),
               Fault.SERVER_ERROR: (500, "ServiceException")},
}


@dataclass(frozen=True)
class Rule:
    """Inject ``fault`` into matching calls: the ``nth`` one, or each with ``probability``.

    ``fault`` None means any of the four, drawn per call. ``attempts`` is how many
    attempts of a faulted call are hit (default: all for pre-send faults, 1 for ``lost``).
    ``then``: a pre-send fault for every attempt after those (``lost`` then
    ``throttle``). ``code``: the error code a throttle or 5xx answers with, instead of
    the service's usual one (``ProvisionedThroughputExceededException``).
    """

    fault: Fault | None
    operation: str | None = None
    site: str | None = None
    nth: int | None = None
    probability: float = 1.0
    attempts: int | None = None
    then: Fault | None = None
    code: str | None = None

    def __post_init__(self) -> None:
        if self.then is not None and self.then not in _PRE_SEND:
            raise ValueError(f"then={self.then.value!r}: only a fault that stops the attempt "
                             "before it is sent can follow (throttle, 5xx, timeout)")

    def matches(self, site: str | None, operation: str) -> bool:
        if self.operation not in (None, "*") and self.operation != operation:
            return False
        if self.site in (None, "*"):
            return True
        if site is None:
            return False
        if self.site.endswith("*"):
            return site.startswith(self.site[:-1])
        return site == self.site


def parse_rules(spec: str) -> list[Rule]:
    """Parse ``KIND[:OPERATION][@SITE][#N|=P]`` rules, comma-separated.

    Raises:
        ValueError: naming the rule that does not parse.
    """
    rules = []
    for text in (part.strip() for part in spec.split(",")):
        if not text:
            continue
        match = _RULE.match(text)
        if match is None:
            raise ValueError(f"--faults: cannot parse rule {text!r} "
                             "(KIND[:OPERATION][@SITE][#N|=P], KIND throttle|5xx|timeout|lost|any)")
        kind, p = match["kind"], match["p"]
        probability = float(p) if p is not None else 1.0
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"--faults: probability in {text!r} must be within 0..1")
        rules.append(Rule(None if kind == "any" else Fault(kind), match["op"], match["site"],
                          int(match["nth"]) if match["nth"] else None, probability))
    return rules


@dataclass
class Call:
    """One AWS call seen while the harness was active."""

    site: str | None
    service: str
    operation: str
    n: int
    params: dict[str, Any] = field(repr=False)
    fault: Fault | None = None
    attempts_hit: int = 0
    attempts: int = 0
    then: Fault | None = None
    code: str | None = None
    reached: bool = False
    """At least one attempt reached the emulator (it may have been applied)."""
    error: str | None = None


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class Faults:
    """The harness: rules, a seed, and a log of every call and injection.

    Args:
        rules: what to inject where.
        seed: makes every probabilistic decision reproducible.
        backoff_scale: multiplies the SDK's retry backoff while active (tests: 0.01,
            so a throttled call does not sleep for seconds).
        clients: extra clients to attach to (already created, from any session).
    """

    def __init__(self, rules: Sequence[Rule], *, seed: int = 0, backoff_scale: float = 1.0,
                 clients: Sequence[Any] = ()) -> None:
        self.rules = list(rules)
        self.seed = seed
        self.backoff_scale = backoff_scale
        self.calls: list[Call] = []
        self._clients = list(clients)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._counts: dict[tuple[str | None, str], int] = {}
        self._rule_counts: dict[int, int] = {}
        self._active = False
        self._builtins: list[tuple[Any, ...]] = []
        self._restore: list[Any] = []
        self._sites = _site_index(all_sites())

    @classmethod
    def parse(cls, spec: str, **options: Any) -> Faults:
        return cls(parse_rules(spec), **options)

    # -- what happened ---------------------------------------------------------------

    @property
    def injected(self) -> list[Call]:
        """The calls a fault was injected into."""
        with self._lock:
            return [c for c in self.calls if c.fault is not None and c.attempts_hit]

    def calls_at(self, site: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.site == site]

    def summary(self) -> dict[str, int]:
        """Injected faults by ``site/fault``."""
        counts: dict[str, int] = {}
        for call in self.injected:
            key = f"{call.site or call.operation}/{call.fault.value if call.fault else '-'}"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Calls made by this thread in the block are neither faulted nor logged."""
        self._local.suspended = True
        try:
            yield
        finally:
            self._local.suspended = False

    # -- attach / detach ----------------------------------------------------------------

    def __enter__(self) -> Faults:
        import botocore.handlers

        from . import _clients

        self._active = True
        for client in self._clients:
            self.attach(client)
        self.attach_emitter(_clients._session().get_component("event_emitter"))  # noqa: SLF001
        self._builtins = [
            ("before-parameter-build", self._begin),
            ("after-call", self._end),
            ("after-call-error", self._end),
            ("before-send", self._before_send, botocore.handlers.REGISTER_FIRST),
            ("before-send", self._after_send, botocore.handlers.REGISTER_LAST),
        ]
        botocore.handlers.BUILTIN_HANDLERS.extend(self._builtins)
        if self.backoff_scale != 1.0:
            self._scale_backoff()
        return self

    def __exit__(self, *exc: object) -> None:
        import botocore.handlers

        self._active = False
        for spec in self._builtins:
            botocore.handlers.BUILTIN_HANDLERS.remove(spec)
        self._builtins = []
        for undo in reversed(self._restore):
            undo()
        self._restore = []

    def attach(self, client: Any) -> None:
        """Inject into ``client`` too (one created before the harness was entered)."""
        self.attach_emitter(client.meta.events)

    def attach_emitter(self, events: Any) -> None:
        uid = f"jobguard-faults-{id(self)}"
        events.register("before-parameter-build", self._begin, unique_id=f"{uid}-begin")
        events.register("after-call", self._end, unique_id=f"{uid}-end")
        events.register("after-call-error", self._end, unique_id=f"{uid}-error")
        events.register_first("before-send", self._before_send, unique_id=f"{uid}-pre")
        events.register_last("before-send", self._after_send, unique_id=f"{uid}-post")

        def undo() -> None:
            events.unregister("before-parameter-build", unique_id=f"{uid}-begin")
            events.unregister("after-call", unique_id=f"{uid}-end")
            events.unregister("after-call-error", unique_id=f"{uid}-error")
            events.unregister("before-send", unique_id=f"{uid}-pre")
            events.unregister("before-send", unique_id=f"{uid}-post")

        self._restore.append(undo)

    def _scale_backoff(self) -> None:
        from botocore.retries import standard

        original = standard.ExponentialBackoff.delay_amount
        scale = self.backoff_scale

        def scaled(backoff: Any, context: Any) -> float:
            return float(original(backoff, context)) * scale

        standard.ExponentialBackoff.delay_amount = scaled  # type: ignore[method-assign,assignment]

        def undo() -> None:
            standard.ExponentialBackoff.delay_amount = original  # type: ignore[method-assign]

        self._restore.append(undo)

    # -- the hooks ----------------------------------------------------------------------

    def _begin(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        local = self._local
        if not self._active or getattr(local, "suspended", False):
            local.call = None
            return
        current = getattr(local, "call", None)
        if current is not None and current.params is params:
            return  # the same hook registered twice on one client
        operation = str(model.name)
        site = self._site_of(operation, sys._getframe(1))  # noqa: SLF001
        with self._lock:
            key = (site, operation)
            n = self._counts[key] = self._counts.get(key, 0) + 1
            call = Call(site, str(model.service_model.service_name), operation, n, params)
            self.calls.append(call)
            rng = random.Random(f"{self.seed}:{site or operation}:{operation}:{n}")
            for index, rule in enumerate(self.rules):
                if not rule.matches(site, operation):
                    continue
                if rule.nth is not None:
                    seen = self._rule_counts[index] = self._rule_counts.get(index, 0) + 1
                    if seen != rule.nth:
                        continue
                elif rng.random() >= rule.probability:
                    continue
                call.fault = rule.fault or rng.choice(list(Fault))
                call.attempts = rule.attempts or (1 if call.fault is Fault.LOST else 99)
                call.then, call.code = rule.then, rule.code
                break
        local.call = call
        local.attempt = 0
        local.last_request = None

    def _end(self, **kwargs: Any) -> None:
        call = getattr(self._local, "call", None)
        if call is not None:
            exception = kwargs.get("exception")
            if exception is not None:
                call.error = type(exception).__name__
            elif kwargs.get("http_response") is not None and (
                    kwargs["http_response"].status_code >= 300):
                call.error = str(kwargs["http_response"].status_code)
        self._local.call = None

    def _before_send(self, request: Any, **_: Any) -> Any:
        local = self._local
        call: Call | None = getattr(local, "call", None)
        if call is None or local.last_request is request:
            return None
        local.last_request = request
        local.attempt += 1
        local.pre_injected = False
        fault = call.fault if local.attempt <= call.attempts else call.then
        if fault is None or fault not in _PRE_SEND:
            return None
        call.attempts_hit += 1
        local.pre_injected = True
        if fault is Fault.TIMEOUT:
            from botocore.exceptions import ConnectTimeoutError

            raise ConnectTimeoutError(endpoint_url=str(request.url))
        from botocore.awsrequest import AWSResponse

        status, code = _ERRORS.get(call.service, _ERRORS["dynamodb"])[fault]
        code = call.code or code
        body, headers = _error_body(call.service, code)
        # Keep an in-process stub (moto sees before-send too) from applying it.
        request.url = _UNROUTABLE
        return AWSResponse(_UNROUTABLE, status, headers, _Raw(body))  # type: ignore[arg-type]

    def _after_send(self, request: Any, **_: Any) -> None:
        local = self._local
        call: Call | None = getattr(local, "call", None)
        if call is None or getattr(local, "pre_injected", False):
            return
        if getattr(local, "after_request", None) is request:
            return
        local.after_request = request
        call.reached = True
        if call.fault is not Fault.LOST or local.attempt > call.attempts:
            return
        call.attempts_hit += 1
        if not _stubbed():
            _send_for_real(request)  # an emulator over HTTP: let the write land first
        from botocore.exceptions import ReadTimeoutError

        raise ReadTimeoutError(endpoint_url=str(request.url))

    def _site_of(self, operation: str, frame: Any) -> str | None:
        depth = 0
        while frame is not None and depth < 90:
            qualname = frame.f_code.co_qualname
            if "__mutmut_" in qualname:
                qualname = _unmutated(qualname)
            sites = self._sites.get((frame.f_globals.get("__name__"), qualname))
            if sites is not None and operation in sites:
                return sites[operation]
            frame = frame.f_back
            depth += 1
        return None


# `make mutate` (mutmut) renames each function it mutates: LeaseRows.acquire runs as
# LeaseRows.xǁLeaseRowsǁacquire__mutmut_orig (or _N), a function f as
# x_f__mutmut_orig. The call site is still the declared function's.
_MUTMUT_NAME = re.compile(r"(?:xǁ[^ǁ]+ǁ|x_)(\w+?)__mutmut_\w+$")


def _unmutated(qualname: str) -> str:
    return _MUTMUT_NAME.sub(r"\1", qualname)


def _site_index(sites: Sequence[CallSite]) -> dict[tuple[str, str], dict[str, str]]:
    index: dict[tuple[str, str], dict[str, str]] = {}
    for site in sites:
        index.setdefault((site.module, site.function), {})[site.operation] = site.name
    return index


def _error_body(service: str, code: str) -> tuple[bytes, dict[str, str]]:
    message = "injected by jobguard.faults"
    if service == "s3":
        xml = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
        return xml.encode(), {"Content-Type": "application/xml"}
    body = json.dumps({"__type": code, "message": message}).encode()
    return body, {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code,
                  "x-amzn-query-error": f"{code};Sender"}


def _stubbed() -> bool:
    """moto in this process answers requests from a before-send hook (in_process())."""
    models = sys.modules.get("moto.core.models")
    stubber = getattr(models, "botocore_stubber", None)
    return bool(getattr(stubber, "enabled", False))


def _send_for_real(request: Any) -> None:
    from botocore.httpsession import URLLib3Session

    URLLib3Session().send(request)
