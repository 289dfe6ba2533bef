"""docs/capacity.md's figures follow from the measured write sizes.

GIVEN ``bench/results.json`` (``make bench``: 12 write units a run, 6 a decision not
run, 1.07 an item at batch 100) and DynamoDB's limits; WHEN the capacity model is
worked out (``bench.fleet_load.capacity_model``); THEN docs/capacity.md and the README state
those figures, so a change in the write sizes fails here until the page is redone.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.fleet_load import capacity_model
from tests._docs import page as doc_page

ROOT = Path(__file__).resolve().parents[2]


def test_the_capacity_page_states_what_the_write_sizes_give():
    results = json.loads((ROOT / "bench" / "results.json").read_text())
    model = capacity_model(results)
    page = (ROOT / "docs" / "capacity.md").read_text()
    assert model == {
        "runs_per_s_one_job": 83, "not_run_per_s_one_job": 166,
        "items_per_s_one_job_b100": 20_000, "items_per_s_one_job_b1": 1_000,
        "jobs_tick_a_minute": 200_000, "jobs_tick_a_minute_1000_items": 2_224,
        "jobs_tick_a_second": 3_333, "items_per_s_table_b100": 37_500}
    for figure in model.values():
        assert f"{figure:,}" in page, figure
    guide = doc_page("docs/how-to/deploy.md")
    section = guide[guide.index("capacity.md") - 600:guide.index("capacity.md") + 600]
    for figure in ("20,000", "83", "200,000"):
        assert figure in section, figure
