"""``jobguard drill``: run the drills against a deployed stack and report.

Against the local AWS (``--endpoint-url``, what ``make demo`` does) or a stack in a real
AWS test account (``--profile``/``--region``): the drills need a drillable stack, built
with ``LambdaBundle(..., drills=True)`` (this repository's: ``-c jobguard:drills=true``;
switches honoured, compressed clock), whose jobs are read from its outputs
(:class:`jobguard.deployment.Deployment`). Exit code 0 only when every drill held.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..deployment import Deployment
from . import switches
from .drills import CRM, DRILLS, REPORT, DrillContext, job_drills
from .report import DrillResult, render_table
from .stack import DeployedStack

__all__ = ["NOT_DRILLABLE", "NoSuchStack", "connect", "drills_page", "main_drill",
           "read_deployment", "report_drills", "run_drills", "write_drills_page"]


class NoSuchStack(LookupError):
    """CloudFormation has no stack of that name (its ``ValidationError``, the cause)."""


def read_deployment(cloudformation: Any, stack: str) -> Deployment:
    """The stack's :class:`~jobguard.deployment.Deployment`, from its outputs (read through
    CloudFormation); :class:`NoSuchStack` when there is no such stack, a
    :class:`~jobguard.deployment.DeploymentError` when its outputs are not jobguard's."""
    from botocore.exceptions import ClientError

    from ..local.deploy import stack_outputs

    try:
        outputs = stack_outputs(cloudformation, stack)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationError":
            raise
        raise NoSuchStack(stack) from exc
    return Deployment.from_outputs(stack, outputs)


def connect(*, stack: str, endpoint: str | None = None, profile: str | None = None,
            region: str | None = None, deployment: Deployment | None = None) -> DeployedStack:
    """The deployed stack: its jobs (names, policies, functions, queues, whether drillable),
    its table and recovery function from its outputs (``deployment`` when already read)."""
    import boto3

    if endpoint:
        from ..local.ministack import REGION

        session = boto3.session.Session(region_name=region or REGION,
                                        aws_access_key_id="test", aws_secret_access_key="test")
    else:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    if deployment is None:
        deployment = read_deployment(session.client("cloudformation", endpoint_url=endpoint),
                                     stack)
    return DeployedStack(session, deployment, endpoint=endpoint)


NOT_DRILLABLE = ("--stack: {stack} is not drillable: build it with LambdaBundle(..., "
                 "drills=True) (one option; see the README's \"Drill your own stack\")")
"""The refusal of a stack whose job outputs say ``"drills": false``."""


def check_drillable_function(stack: DeployedStack, job: str) -> None:
    """Refuse, before anything is armed or ticked, a job whose function is not deployed
    drillable, whatever the stack's outputs say (they are data anyone who deploys the
    stack writes): its configuration must carry ``JOBGUARD_DRILLS=1``, which only a
    drillable build sets, and without which the function honours no switch and runs the
    real job for every tick a drill sends."""
    from .switches import DRILLS as VARIABLE

    function = stack.jobs[job].function
    try:
        config = stack.lambda_.get_function_configuration(FunctionName=function)
    except Exception as exc:  # noqa: BLE001 - said in one line, nothing armed
        raise ValueError(f"--job: {job}'s function {function!r} (from stack "
                         f"{stack.name!r}'s outputs) could not be read: "
                         f"{type(exc).__name__}: {exc}") from None
    variables = (config.get("Environment") or {}).get("Variables") or {}
    if variables.get(VARIABLE) != "1":
        raise ValueError(f"--stack: {stack.name}'s output says {job} is drillable, but its "
                         f"function {function!r} has no {VARIABLE}=1: it would run the real "
                         "job for every tick a drill sends; nothing was armed or ticked")


def run_drills(stack: DeployedStack, *, only: Sequence[str] = (), job: str | None = None,
               say: Callable[[str], None] = print) -> list[DrillResult]:
    """The example jobs' drills, or with ``job`` the drills for any deployed job."""
    if stack.jobs and not any(handle.drills for handle in stack.jobs.values()):
        raise ValueError(NOT_DRILLABLE.format(stack=stack.name))  # whichever job is asked
    if job is not None:
        if job not in stack.jobs:
            raise ValueError(f"--job: {job!r} is not a job of stack {stack.name!r} (jobs: "
                             f"{', '.join(sorted(stack.jobs)) or 'none'})")
        drills, drilled = job_drills(job), [job]
    else:
        drills, drilled = DRILLS, [CRM, REPORT]
        missing = {CRM, REPORT} - set(stack.jobs)
        if missing:
            mine = ", ".join(sorted(stack.jobs)) or "none"
            raise ValueError(f"--job: stack {stack.name!r} has none of jobguard's example "
                             f"jobs, whose drills run without --job; drill one of its "
                             f"jobs with --job NAME (its jobs: {mine})")
    if not all(stack.jobs[name].drills for name in drilled):
        raise ValueError(NOT_DRILLABLE.format(stack=stack.name))
    for name in drilled:  # the outputs say drillable; the function itself must agree
        check_drillable_function(stack, name)
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
        result.started_at_ms = int(time.time() * 1000)
        try:
            drill.run(ctx, result)
        except Exception as exc:  # noqa: BLE001 - a drill that breaks is a failed drill
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            for name in stack.jobs:  # a paused worker is let go (a deleted switch
                switches.disarm_all(stack.ddb, stack.table, name)  # releases it too)
        result.seconds = time.monotonic() - started
        result.ended_at_ms = int(time.time() * 1000)
        for line in result.injected:
            say(f"   injected     {line}")
        for check in result.checks:
            say(f"   {'ok ' if check.ok else 'BAD'} {check.side:<11} {check.what}")
        if result.error:
            say(f"   ERROR        {result.error}")
        say(f"   -> {'held' if result.held else 'FAILED'} ({result.seconds:.1f} s)")
        results.append(result)
    return results


def drills_page(stack: DeployedStack, results: Sequence[DrillResult], *,
                now_ms: int | None = None) -> str:
    """One page: every drill's checks and the timeline of what its jobs' run logs
    recorded while it ran (read back through the store's run-record query)."""
    from dataclasses import asdict

    from ..timeline import DrillSection, Window, collect, render_drills_page

    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    sections = []
    for index, result in enumerate(results):
        jobs = [t.job for t in result.tallies if t.job in stack.jobs] or sorted(stack.jobs)
        start = result.started_at_ms or now_ms
        end = max(result.ended_at_ms, start + 1000)
        # a margin each side, never reaching into the drill before or after (drills run
        # one after the other: each page shows what its own drill caused)
        margin = max(250, (end - start) // 50)
        low, high = start - margin, end + margin
        if index and results[index - 1].ended_at_ms:
            low = max(low, results[index - 1].ended_at_ms + 1)
        if index + 1 < len(results) and results[index + 1].started_at_ms:
            high = min(high, results[index + 1].started_at_ms - 1)
        window = Window(min(low, start), max(high, end))
        sections.append(DrillSection(
            name=result.name, title=result.title, held=result.held, seconds=result.seconds,
            injected=list(result.injected),
            checks=[(c.side, c.what, c.ok) for c in result.checks],
            timeline=collect(stack.store, jobs, window, now_ms=now_ms,
                             title=f"drill {result.name}"),
            error=result.error, tallies=[asdict(t) for t in result.tallies]))
    return render_drills_page(sections, generated_at_ms=now_ms)


def write_drills_page(stack: DeployedStack, results: Sequence[DrillResult],
                      path: Path) -> Path:
    """The drills page, written whole or not at all."""
    from ..timeline.command import write_page

    return write_page(drills_page(stack, results), path)


def summary(results: Sequence[DrillResult]) -> dict[str, Any]:
    return {"held": all(r.held for r in results) and bool(results),
            "drills": [r.as_dict() for r in results]}


def report_drills(results: Sequence[DrillResult], *, html: Path | None,
                  page: Callable[[], str], quiet: bool) -> int:
    """Write the drills page (``html``), then print the results: the table, or the JSON
    summary with ``quiet``. A page that cannot be built or written (its folder removed
    while the drills ran, the disk full, the run log unreadable) is said after the
    results, never instead of them, and the exit code is 1."""
    from ..timeline.command import write_page

    report = summary(results)
    failed = None
    if html is not None:
        try:
            write_page(page(), html)
            report["html"] = str(html)
        except Exception as exc:  # noqa: BLE001 - the drills' results are printed anyway
            from ..errors import JobGuardError

            failed = str(exc) if isinstance(exc, JobGuardError) else \
                f"drills page: not written to {html}: {type(exc).__name__}: {exc}"
            report["html_error"] = failed
    if quiet:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print("\n" + render_table(results))
        if "html" in report:
            print(f"\ndrills page: {html}")
    if failed is not None:
        sys.stdout.flush()
        print(f"error: {failed}", file=sys.stderr)
        return 1
    return 0 if report["held"] else 1


def main_drill(args: Any, *, deployment: Deployment) -> int:
    """The CLI entry (``jobguard drill``), for the deployment the CLI read."""
    html = None
    if getattr(args, "html", None) is not None:
        from ..timeline.command import TimelineOutput, check_html_path

        try:
            html = check_html_path(args.html)  # before a minute of drills, not after
        except TimelineOutput as exc:
            raise ValueError(str(exc)) from None
    stack = connect(stack=deployment.stack, endpoint=args.endpoint_url,
                    profile=args.profile, region=args.region, deployment=deployment)
    quiet = bool(args.json)
    results = run_drills(stack, only=args.only or (), job=args.job,
                         say=(lambda line: None) if quiet else print)
    return report_drills(results, html=html, page=lambda: drills_page(stack, results),
                         quiet=quiet)
