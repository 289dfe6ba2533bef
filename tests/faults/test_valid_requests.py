"""Every request the library builds is valid against the service model.

The library's own clients skip botocore's parameter validation (``_clients.config``:
the library builds its requests itself, and walking every attribute of a page of
outcomes cost more CPU than the rest of the client). So this test validates instead:
a ``before-parameter-build`` handler in botocore's built-in handlers (every client
made from now on carries it) runs botocore's own ``ParamValidator`` on each request of
a crm-sync run under the fault matrix's scenario (a takeover, a reconciled note, a
coalesced tick and its follow-up, a known failure at the destination, the S3
destination too) and of explorer histories (every actor: deliveries, SQS records,
heartbeats, recovery, the reconciler, operator commands, TTL deletions, damage).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore import handlers
from botocore.validate import ParamValidator

from jobguard._clients import config
from jobguard.callsites import Fault, all_sites
from jobguard.faults import Rule

from ._scenario import run_scenario

# Declared sites this test does not reach, and why.
NOT_REACHED = {
    "cli.recover.invoke": "the recovery Lambda's Invoke (the CLI builds it from the "
                          "request the recovery code validates itself)",
    "cli.known_jobs.scan": "the CLI's scan for a mistyped job name (a fixed request)",
    "lambda.continue": "the explorer's links invoke through its own port: the real invoke "
                       "is validated by test_the_continuation_invoke_is_valid",
}


class Validator:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.seen: Counter[tuple[str, str]] = Counter()
        self._validator = ParamValidator()

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        self.seen[(service, model.name)] += 1
        report = self._validator.validate(params, model.input_shape)
        if report.has_errors():
            self.errors.append(f"{service}.{model.name}: {report.generate_report()}")


@pytest.fixture
def validator() -> Iterator[Validator]:
    check = Validator()
    entry = ("before-parameter-build", check)
    handlers.BUILTIN_HANDLERS.append(entry)
    try:
        yield check
    finally:
        handlers.BUILTIN_HANDLERS.remove(entry)


def test_the_librarys_clients_skip_botocore_parameter_validation() -> None:
    assert config().parameter_validation is False


@pytest.mark.timeout(600)
def test_every_request_the_library_builds_is_valid(validator: Validator) -> None:
    from tests.explorer.sim import run_history

    run_scenario([])
    run_scenario([Rule(Fault.THROTTLE, site="destination.dynamodb.put", nth=2)])
    run_scenario([], destination="s3")
    for seed in (3, 7, 11, 19, 23, 31):
        run_history(seed=seed, trace=False)
    assert validator.errors == []
    reached = {op for op in validator.seen}
    missing = sorted(s.name for s in all_sites() if (s.service, s.operation) not in reached
                     and s.name not in NOT_REACHED)
    assert missing == [], f"no request of these sites was validated: {missing}"


def test_the_continuation_invoke_is_valid(validator: Validator, aws: Any) -> None:
    """A chain's link invokes its own function (``lambda.continue``): the request
    ``LambdaContinuation`` builds is valid (the emulator then refuses it: no such
    function, a 404, which is what a wrong name gets on AWS too)."""
    from jobguard.continuation import LambdaContinuation
    from jobguard.errors import ContinuationRefused
    from jobguard.triggers import continuation_event

    lam = aws.sandbox.client("lambda")
    with pytest.raises(ContinuationRefused):
        LambdaContinuation("no-such-function", client=lam).send(
            continuation_event("crm-sync", "01J0000000000000000000RUN1", 2))
    assert validator.errors == []
    assert validator.seen[("lambda", "Invoke")] == 1
