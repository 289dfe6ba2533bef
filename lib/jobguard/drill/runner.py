"""``jobguard drill``: run the drills against a deployed stack and report.

Against the local AWS (``--endpoint-url``, what ``make demo`` does) or a stack in a real
AWS test account (``--profile``/``--region``): the drills need a stack deployed with
``-c jobguard:drills=true`` (switches honoured, compressed clock). Exit code 0 only when
every drill held.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import switches
from .drills import CRM, DRILLS, REPORT, DrillContext, job_drills
from .report import DrillResult, render_table
from .stack import DeployedStack

__all__ = ["connect", "main_drill", "run_drills"]


def connect(*, stack: str, endpoint: str | None = None, profile: str | None = None,
            region: str | None = None) -> DeployedStack:
    """The deployed stack, its outputs read through CloudFormation."""
    import boto3

    from ..local.deploy import stack_outputs

    if endpoint:
        from ..local.ministack import REGION

        session = boto3.session.Session(region_name=region or REGION,
                                        aws_access_key_id="test", aws_secret_access_key="test")
    else:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    outputs = stack_outputs(session.client("cloudformation", endpoint_url=endpoint), stack)
    from handlers.jobs import JOBS  # the deployment's job definitions

    return DeployedStack(session, outputs, endpoint=endpoint,
                         jobs=[(j.name, j.policy.value) for j in JOBS])


def run_drills(stack: DeployedStack, *, only: Sequence[str] = (), job: str | None = None,
               say: Callable[[str], None] = print) -> list[DrillResult]:
    """The example jobs' drills, or with ``job`` the drills for any deployed job."""
    if job is not None:
        if job not in stack.jobs:
            raise ValueError(f"--job: {job!r} has no function output in the stack (jobs: "
                             f"{', '.join(sorted(stack.jobs))})")
        drills = job_drills(job)
    else:
        drills = DRILLS
        missing = {CRM, REPORT} - set(stack.jobs)
        if missing:
            raise ValueError(f"--stack: no {sorted(missing)} function: deploy the example "
                             "jobs with -c jobguard:drills=true, or drill yours with --job")
    unknown = set(only) - {d.name for d in drills}
    if unknown:
        names = ", ".join(d.name for d in drills)
        raise ValueError(f"--only: unknown drill {sorted(unknown)}; drills: {names}")
    ctx = DrillContext(stack, say=say)
    results = []
    for drill in drills:
        if only and drill.name not in only:
            continue
        result = DrillResult(drill.name, drill.title)
        say(f"\n== {drill.name}: {drill.title}")
        started = time.monotonic()
        try:
            drill.run(ctx, result)
        except Exception as exc:  # noqa: BLE001 - a drill that breaks is a failed drill
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            for name in stack.jobs:  # a paused worker is let go (a deleted switch
                switches.disarm_all(stack.ddb, stack.table, name)  # releases it too)
        result.seconds = time.monotonic() - started
        for line in result.injected:
            say(f"   injected     {line}")
        for check in result.checks:
            say(f"   {'ok ' if check.ok else 'BAD'} {check.side:<11} {check.what}")
        if result.error:
            say(f"   ERROR        {result.error}")
        say(f"   -> {'held' if result.held else 'FAILED'} ({result.seconds:.1f} s)")
        results.append(result)
    return results


def summary(results: Sequence[DrillResult]) -> dict[str, Any]:
    return {"held": all(r.held for r in results) and bool(results),
            "drills": [r.as_dict() for r in results]}


def main_drill(args: Any) -> int:
    """The CLI entry (``jobguard drill``)."""
    stack = connect(stack=args.stack, endpoint=args.endpoint_url, profile=args.profile,
                    region=args.region)
    quiet = bool(args.json)
    results = run_drills(stack, only=args.only or (), job=args.job,
                         say=(lambda line: None) if quiet else print)
    if quiet:
        json.dump(summary(results), sys.stdout, indent=2)
        print()
    else:
        print("\n" + render_table(results))
    return 0 if summary(results)["held"] else 1
