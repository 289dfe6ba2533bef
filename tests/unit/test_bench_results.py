"""``make bench`` rewrites bench/results.json: what it measured replaces the old figures,
and nothing else in the file is dropped."""

from __future__ import annotations

from bench.common import merge_results


def test_a_bench_run_keeps_the_keys_it_did_not_measure():
    """GIVEN a results file with a scale figure, another tool's section and meta stages
    WHEN a bench run without the scale stage merges its figures
    THEN its figures replace the old ones and every other key stays, meta merged one
    level down."""
    previous = {"wcu_per_skip": 12.0, "scale_items_per_s": 583.0, "mutants": {"killed": 9},
                "faults_load": {"triggers": 1},
                "meta": {"stage_s": {"scale": 40.0, "requests": 9.0}, "date": "old",
                         "targets_met": {"scale": True}}}
    merged = merge_results(previous, {"wcu_per_skip": 6.0}, {"triggers": 1000},
                           {"stage_s": {"requests": 8.0}, "date": "new",
                            "targets_met": {"wcu": True}})
    assert merged == {
        "wcu_per_skip": 6.0, "scale_items_per_s": 583.0, "mutants": {"killed": 9},
        "faults_load": {"triggers": 1000},
        "meta": {"stage_s": {"scale": 40.0, "requests": 8.0}, "date": "new",
                 "targets_met": {"scale": True, "wcu": True}}}
