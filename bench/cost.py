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

__all__ = ["MONTHLY_ITEMS", "PRICES", "monthly_costs", "render"]

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
