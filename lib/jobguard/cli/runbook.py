"""``runbook``: a job's runbook, from the deployed stack's outputs (the definition as
deployed, its runbook link, a drill deployment said first) or from the named jobs
module. Changes when where the runbook comes from, or what is said around it, changes."""

from __future__ import annotations

import argparse

from .jobs import _definitions, _job_name
from .output import _out
from .refusal import CommandError, _nearest
from .stacks import _deployment, _named_stack

DRILL_DEPLOYMENT = ("A drill deployment (LambdaBundle(drills=True)): its schedule is disabled "
                    "(only `jobguard drill` delivers ticks), it runs on the drill clock, its "
                    "function honours drill fault switches, and it has no dead-man alarm. "
                    "Never production.")


def cmd_runbook(args: argparse.Namespace) -> int:
    """The job's runbook: from the deployed stack's outputs (the definition as deployed,
    and the runbook link its author set), or from the named jobs module. Flags before
    variables: ``--stack``, ``--jobs-module``, then ``JOBGUARD_STACK``,
    ``JOBGUARD_JOBS_MODULE``."""
    from ..runbook import render

    job = _job_name(args)
    named = _named_stack(args)
    module_flag = args.jobs_module is not None and args.jobs_module_field == "--jobs-module"
    if named is not None and (named[1] == "--stack" or not module_flag):
        deployment = _deployment(args)
        if job not in deployment.jobs:
            known = sorted(deployment.jobs)
            raise CommandError("JOB", f"no job {job!r} in stack {deployment.stack!r} "
                               f"({named[1]}; its jobs: {', '.join(known) or 'none'})"
                               f"{_nearest(job, known)}")
        deployed = deployment.jobs[job]
        text = render(deployed.definition, fleet=deployed.fleet)
        if deployed.drills:  # said first: its alarms and schedule are not production's
            title, _, rest = text.partition("\n")
            text = f"{title}\n\n{DRILL_DEPLOYMENT}\n{rest}"
        if deployed.runbook:
            text = f"Runbook: {deployed.runbook}\n\n{text}"
        _out(args, {"job": job, "stack": deployment.stack, "link": deployed.runbook,
                    "drills": deployed.drills, "fleet": deployed.fleet, "runbook": text},
             text)
        return 0
    definitions = _definitions(args, needed_by="runbook")
    if job not in definitions:
        raise CommandError("JOB", f"{job!r} is not defined in {args.jobs_module} "
                           f"(known: {', '.join(definitions)}){_nearest(job, list(definitions))}")
    text = render(definitions[job])
    _out(args, {"job": job, "stack": None, "link": None, "drills": None, "fleet": None,
                "runbook": text}, text)
    return 0
