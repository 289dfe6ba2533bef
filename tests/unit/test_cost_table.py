"""The monthly DynamoDB cost table in docs/deploying.md is the one ``bench/cost.py``
computes from the measured figures in ``bench/results.json`` (``make bench`` prints it)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.cost import monthly_costs, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_deploying_doc_shows_the_table_of_the_measured_figures() -> None:
    figures = json.loads((ROOT / "bench" / "results.json").read_text())
    doc = (ROOT / "docs" / "deploying.md").read_text()
    table = doc.split("<!-- item costs: begin -->", 1)[1].split("<!-- item costs: end -->")[0]
    assert table.strip() == render(figures), "regenerate: make bench (it prints the table)"


def test_the_arithmetic() -> None:
    figures = {"wcu_per_item_b100": 1.0, "rcu_per_item_b100": 2.0, "item_bytes": 1024.0,
               "powertools_wcu_per_item": 2.0, "powertools_rcu_per_item": 0.0,
               "powertools_item_bytes": 512.0}
    first = monthly_costs(figures)[0]
    ours, theirs = first["jobguard"], first["powertools"]
    assert first["items"] == 1_000_000
    assert isinstance(ours, dict) and isinstance(theirs, dict)
    assert round(ours["writes"], 6) == 0.625 and round(ours["reads"], 6) == 0.25
    # 1M completions kept 15 of a month's 30.4 days, 1 KB each, storage + PITR
    assert round(ours["storage"], 4) == round(1e6 * 360 / 730 * 1024 / 1024 ** 3 * 0.45, 4)
    assert round(theirs["writes"], 6) == 1.25 and theirs["reads"] == 0
    assert theirs["storage"] < 0.001  # an hour of records
    assert round(ours["total"], 6) == round(ours["writes"] + ours["reads"] + ours["storage"], 6)
