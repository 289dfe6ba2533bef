"""What the ledger costs a month in DynamoDB, from the measured figures (pure).

On-demand list prices for us-east-1 (the AWS pricing page; check them before relying on
them): $0.625 per million write request units, $0.125 per million read request units,
$0.25 per GB-month of storage and $0.20 per GB-month of point-in-time recovery (the
stack turns it on). A write request unit is a write unit of the measured kind (1 KB,
twice in a transaction); a read request unit a strongly consistent read of 4 KB.

Per item, at batch size 100 (1,000 items a run, the bench's run): jobguard's measured
write and read units (``wcu_per_item_b100``, ``rcu_per_item_b100``: every write of the
run, its lease and run record spread over its items), and a completion kept for
``item_ttl`` (15 days) at its measured size (``item_bytes``); Powertools'
``@idempotent_function`` (``powertools_wcu_per_item``, ``powertools_rcu_per_item``), its
record kept for its default ``expires_after_seconds`` (1 hour) at ``powertools_item_bytes``.
A month is 730 hours.

``make bench`` prints the table; ``docs/deploying.md`` shows it and a test keeps the two
equal (``tests/unit/test_cost_table.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CLOUDWATCH_PRICES", "FLEET_SIZES", "MONTHLY_ITEMS", "PRICES", "fixed_monthly",
           "inventory", "monthly_costs", "render", "render_fleet"]

PRICES = {"write_unit": 0.625e-6, "read_unit": 0.125e-6, "gb_month": 0.25, "pitr_gb_month": 0.20}
MONTHLY_ITEMS = (1_000_000, 10_000_000, 100_000_000)
HOURS_A_MONTH = 730
JOBGUARD_KEPT_HOURS = 15 * 24  # item_ttl, 15 days
POWERTOOLS_KEPT_HOURS = 1  # expires_after_seconds, 3600 by default
GB = 1024 ** 3


def _side(items: int, wcu: float, rcu: float, item_bytes: float, kept_hours: float
          ) -> dict[str, float]:
    stored_gb = items * min(1.0, kept_hours / HOURS_A_MONTH) * item_bytes / GB
    cost = {"writes": items * wcu * PRICES["write_unit"],
            "reads": items * rcu * PRICES["read_unit"],
            "storage": stored_gb * (PRICES["gb_month"] + PRICES["pitr_gb_month"])}
    cost["total"] = sum(cost.values())
    return cost


def monthly_costs(figures: Mapping[str, float]) -> list[dict[str, object]]:
    """One row per monthly volume: each side's cost, in dollars, by part."""
    rows = []
    for items in MONTHLY_ITEMS:
        rows.append({
            "items": items,
            "jobguard": _side(items, figures["wcu_per_item_b100"],
                              figures["rcu_per_item_b100"], figures["item_bytes"],
                              JOBGUARD_KEPT_HOURS),
            "powertools": _side(items, figures["powertools_wcu_per_item"],
                                figures["powertools_rcu_per_item"],
                                figures["powertools_item_bytes"], POWERTOOLS_KEPT_HOURS),
        })
    return rows


def _dollars(value: float) -> str:
    return f"${value:,.2f}"


def render(figures: Mapping[str, float]) -> str:
    """The markdown table of ``docs/deploying.md``."""
    lines = [
        "| items a month | jobguard: writes + reads + storage | jobguard | Powertools: "
        "writes + reads + storage | Powertools |",
        "|---|---|---|---|---|",
    ]
    for row in monthly_costs(figures):
        ours, theirs = row["jobguard"], row["powertools"]
        assert isinstance(ours, dict) and isinstance(theirs, dict)
        lines.append(
            f"| {row['items']:,} | {_dollars(ours['writes'])} + {_dollars(ours['reads'])} + "
            f"{_dollars(ours['storage'])} | **{_dollars(ours['total'])}** | "
            f"{_dollars(theirs['writes'])} + {_dollars(theirs['reads'])} + "
            f"{_dollars(theirs['storage'])} | **{_dollars(theirs['total'])}** |")
    return "\n".join(lines)


# -- the fixed monthly cost of a deployment, from its synthesized templates ------------------

CLOUDWATCH_PRICES = {"alarm_metric": 0.10, "custom_metric": 0.30, "dashboard": 3.00,
                     "kms_key": 1.00}
"""us-east-1 list prices (the CloudWatch and KMS pricing pages): a standard-resolution alarm
$0.10 a month per metric it analyzes (a metric-math alarm is billed for each metric in its
expression), a custom metric $0.30 a month (each name and set of dimension values, billed
by the hour for hours with data), a dashboard $3.00 a month, a customer-managed KMS key
$1.00 a month. Free tiers (10 alarm metrics, 10 custom metrics, 3 dashboards of up to 50
metrics) are left out: they are per account, not per deployment."""

FLEET_SIZES = (1, 10, 100)


def _alarm_metrics(properties: Mapping[str, object]) -> int:
    metrics = properties.get("Metrics")
    if isinstance(metrics, list):  # metric math: each metric it reads is billed
        return sum(1 for m in metrics if isinstance(m, dict) and "MetricStat" in m)
    return 1


def _literal(value: object) -> str | None:
    return value if isinstance(value, str) else None


def inventory(templates: list[Mapping[str, object]]) -> dict[str, int]:
    """What a deployment is billed for at rest, counted in its templates (a stack's and
    its nested stacks'): alarms and the metrics they analyze, dashboards, customer-managed
    keys, and the custom metrics its job functions emit at rest (the EMF dimensions: one
    per :data:`~jobguard.observability.AT_REST_METRICS` name per ``job``, or per ``fleet``
    for a job of a :class:`~jobguard.cdk.JobFleet`)."""
    from jobguard import environment
    from jobguard.observability import AT_REST_METRICS

    counts = {"alarms": 0, "alarm_metrics": 0, "dashboards": 0, "kms_keys": 0, "jobs": 0}
    dimension_values: set[tuple[str, str]] = set()
    for template in templates:
        resources = template.get("Resources", {})
        assert isinstance(resources, dict)
        for resource in resources.values():
            kind, properties = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::CloudWatch::Alarm":
                counts["alarms"] += 1
                counts["alarm_metrics"] += _alarm_metrics(properties)
            elif kind == "AWS::CloudWatch::Dashboard":
                counts["dashboards"] += 1
            elif kind == "AWS::KMS::Key":
                counts["kms_keys"] += 1
            elif kind == "AWS::Lambda::Function":
                description = _literal(properties.get("Description")) or ""
                if not description.startswith("jobguard job "):
                    continue
                counts["jobs"] += 1
                variables = properties.get("Environment", {}).get("Variables", {})
                fleet = _literal(variables.get(environment.FLEET))
                job = description.split()[2]
                dimension_values.add(("fleet", fleet) if fleet else ("job", job))
    counts["custom_metrics"] = len(dimension_values) * len(AT_REST_METRICS)
    return counts


def fixed_monthly(counts: Mapping[str, int]) -> dict[str, float]:
    """The fixed monthly cost, in dollars, by part, of a deployment's :func:`inventory`."""
    cost = {"alarms": counts["alarm_metrics"] * CLOUDWATCH_PRICES["alarm_metric"],
            "custom_metrics": counts["custom_metrics"] * CLOUDWATCH_PRICES["custom_metric"],
            "dashboards": counts["dashboards"] * CLOUDWATCH_PRICES["dashboard"],
            "kms_keys": counts["kms_keys"] * CLOUDWATCH_PRICES["kms_key"]}
    cost["total"] = sum(cost.values())
    cost["per_job"] = cost["total"] / max(1, counts["jobs"])
    return cost


def render_fleet(rows: Mapping[int, Mapping[str, Mapping[str, float]]],
                 counts: Mapping[int, Mapping[str, Mapping[str, int]]]) -> str:
    """The README's table: per fleet size, a :class:`JobFleet` beside one alarm set per
    job (each side's alarms and metrics, total and per job)."""
    lines = ["| jobs | JobFleet: alarm metrics, custom metrics | a month | per job | "
             "alarms per job: alarm metrics, custom metrics | a month | per job |",
             "|---|---|---|---|---|---|---|"]
    for size in sorted(rows):
        fleet, alone = rows[size]["fleet"], rows[size]["per_job"]
        fc, ac = counts[size]["fleet"], counts[size]["per_job"]
        lines.append(
            f"| {size} | {fc['alarm_metrics']}, {fc['custom_metrics']} | "
            f"{_dollars(fleet['total'])} | **{_dollars(fleet['per_job'])}** | "
            f"{ac['alarm_metrics']}, {ac['custom_metrics']} | {_dollars(alone['total'])} | "
            f"**{_dollars(alone['per_job'])}** |")
    return "\n".join(lines)
