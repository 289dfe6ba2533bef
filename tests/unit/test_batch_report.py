"""What a run's report (``BatchReport.as_dict``, written on its run record) keeps.

GIVEN a run with many payload conflicts WHEN its report is written THEN the conflicting
ids are bounded (the record is one DynamoDB item: 400 KB at most), and the count says how
many there were.
"""

from __future__ import annotations

import pytest

from jobguard._claim_reports import BatchReport

pytestmark = pytest.mark.fast


def test_a_report_lists_the_first_20_conflicting_ids_and_counts_them_all():
    ids = [f"contact-{n:05d}" for n in range(25)]
    data = BatchReport(conflicts=25, conflict_ids=ids).as_dict()
    assert data["conflict_ids"] == ids[:20] and data["conflicts"] == 25


def test_a_report_without_conflicts_leaves_out_what_is_empty():
    data = BatchReport(completed=3).as_dict()
    assert data["completed"] == 3 and "cursor_from" not in data
    assert data["conflict_ids"] == []
