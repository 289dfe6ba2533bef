"""A fleet of 100 jobs: does it fit CloudFormation, how long does it synthesize, and what
does it cost at rest (``make bench``; alone: ``python -m bench.fleet``).

The example fleet (``infra.fleet``: ``handlers.fleet.fleet_jobs``, policies mixed, a third
of the jobs with a trigger queue) is synthesized with cdk-nag, as a :class:`JobFleet`
and, for comparison, as one :class:`GuardedJob` per job with its own alarms (ten to a
nested stack, so that it fits at all), at 1, 10 and 100 jobs. From the templates
(``bench.cost.inventory``, :func:`bench.cost.fixed_monthly`):

``fleet_100_resources_max_per_stack``
    The most resources in any one template (the stack or a nested stack) of the 100-job
    fleet. Target: at most 500 (CloudFormation's limit).
``fleet_100_outputs``
    Outputs of the fleet's stack (one ``<Job>Job`` per job, ...). Target: at most 200.
``fleet_100_synth_s``
    Wall time of building and synthesizing the 100-job fleet app (cdk-nag included),
    after a warm-up synthesis. Reported, no target.
``fleet_fixed_cost_per_job_usd``
    The 100-job fleet's fixed monthly cost at list price (alarms by the metrics they
    analyze, custom metrics at rest, the dashboard, KMS keys) divided by its jobs.
    Target: at most $0.30.
``fleet_per_job_alarms_cost_per_job_usd``
    The same 100 jobs, each with its own alarms: the comparison. Reported.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cost import FLEET_SIZES, fixed_monthly, inventory, render_fleet  # noqa: E402

__all__ = ["measure", "synth_templates"]

SIDES = ("fleet", "per_job")


def synth_templates(count: int, *, per_job_alarms: bool = False
                    ) -> tuple[list[dict[str, Any]], float]:
    """The templates (the stack's first, then its nested stacks') of the example fleet of
    ``count`` jobs, and the seconds building and synthesizing it took."""
    from infra.fleet import build_fleet_app

    with tempfile.TemporaryDirectory() as outdir:
        began = time.perf_counter()
        app = build_fleet_app(count, outdir=outdir, per_job_alarms=per_job_alarms)
        app.synth()
        took = time.perf_counter() - began
        paths = sorted(Path(outdir).glob("*.template.json"),
                       key=lambda p: (".nested." in p.name, p.name))
        return [json.loads(p.read_text()) for p in paths], took


def measure() -> tuple[dict[str, float], str]:
    """The figures above, and the README's cost table (:func:`bench.cost.render_fleet`)."""
    synth_templates(1)  # warm: jsii's Node process and aws-cdk-lib loaded once
    rows: dict[int, dict[str, dict[str, float]]] = {}
    counts: dict[int, dict[str, dict[str, int]]] = {}
    figures: dict[str, float] = {}
    for size in FLEET_SIZES:
        rows[size], counts[size] = {}, {}
        for side in SIDES:
            templates, took = synth_templates(size, per_job_alarms=side == "per_job")
            counts[size][side] = inventory(templates)
            rows[size][side] = fixed_monthly(counts[size][side])
            if size == 100 and side == "fleet":
                figures["fleet_100_synth_s"] = took
                figures["fleet_100_resources_max_per_stack"] = max(
                    len(t["Resources"]) for t in templates)
                figures["fleet_100_outputs"] = len(templates[0].get("Outputs", {}))
    figures["fleet_fixed_cost_per_job_usd"] = rows[100]["fleet"]["per_job"]
    figures["fleet_per_job_alarms_cost_per_job_usd"] = rows[100]["per_job"]["per_job"]
    return figures, render_fleet(rows, counts)


def main() -> None:
    figures, table = measure()
    for name, value in figures.items():
        print(f"{name:<42} {value:.3f}")
    print("\nFixed monthly cost at list price (us-east-1):\n" + table)


if __name__ == "__main__":
    main()
