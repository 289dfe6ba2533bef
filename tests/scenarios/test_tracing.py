"""Tracing (``JobConfig(tracing=True)`` or ``JOBGUARD_TRACING=1``): each run is a
Powertools Tracer subsegment ``## jobguard <job>`` annotated with its run id and fence,
under the function's own service name.

Powertools' Tracer keeps one configuration per process, shared by every instance: the
provider is given here once (a recorder in place of X-Ray's), and jobguard's Tracer
finds it, as it finds the service name the function's own Tracer set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

from jobguard.records import Decision

from ._support import make_job, tick

JOB = "traced-job"


class Segment(BaseSegment):
    def __init__(self, name: str) -> None:
        self.name, self.annotations = name, {}

    def close(self, end_time: int | None = None) -> None: ...

    def add_subsegment(self, subsegment: Any) -> None: ...

    def remove_subsegment(self, subsegment: Any) -> None: ...

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None: ...

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        ...


class Recorder(BaseProvider):
    """X-Ray's place: the subsegments opened, and what was open while the handler ran."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.open: list[str] = []

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[Segment]:
        segment = Segment(name or "")
        self.segments.append(segment)
        self.open.append(segment.name)
        try:
            yield segment
        finally:
            self.open.pop()

    in_subsegment_async = in_subsegment  # type: ignore[assignment]

    def put_annotation(self, key: str, value: Any) -> None: ...

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None: ...

    def patch(self, modules: Any) -> None: ...

    def patch_all(self) -> None: ...


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    monkeypatch.delenv("POWERTOOLS_SERVICE_NAME", raising=False)
    Tracer._reset_config()
    provider = Recorder()
    Tracer(service="orders", provider=provider, auto_patch=False)  # the function's own
    yield provider
    Tracer._reset_config()


def test_a_traced_run_is_a_subsegment_with_its_run_id_and_fence(aws, clock, recorder):
    # GIVEN a job that asks for tracing, in a function whose own Tracer names "orders"
    seen: list[list[str]] = []

    def handler(event: Any, context: Any) -> dict[str, Any]:
        seen.append(list(recorder.open))
        return {"ok": True}

    job = make_job(aws, clock, handler, name=JOB, tracing=True)

    # WHEN two ticks run
    job(tick(JOB, clock.now()), None)
    clock.advance(timedelta(minutes=1))
    job(tick(JOB, clock.now()), None)

    # THEN each ran inside its own subsegment, annotated with its run's id and fence
    runs = sorted((r for r in aws.runs(JOB) if r.decision is Decision.RAN),
                  key=lambda r: r.fence or 0)
    assert seen == [[f"## jobguard {JOB}"]] * 2
    assert [s.name for s in recorder.segments] == [f"## jobguard {JOB}"] * 2
    assert [s.annotations for s in recorder.segments] == [
        {"run_id": r.run_id, "fence": r.fence} for r in runs]
    # AND the function's service name is still its own: jobguard's Tracer shares the
    # process's configuration and never renames it (a Tracer made later says "orders")
    assert Tracer().service == "orders"


def test_an_untraced_job_opens_no_subsegment(aws, clock, recorder):
    job = make_job(aws, clock, lambda event, context: {"ok": True}, name=JOB)
    job(tick(JOB, clock.now()), None)
    assert recorder.segments == []
