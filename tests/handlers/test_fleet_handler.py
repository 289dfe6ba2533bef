"""The example fleet's one handler (``handlers.fleet``): job ``fleet-job-NNN``'s function
runs ``handlers.fleet.job_NNN``, guarded by that job's own definition; a tick claims and
completes the tick's one work item, and a second delivery of the tick is a duplicate."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from handlers import fleet
from jobguard import environment
from tests.conftest import emf_totals

from .conftest import LambdaContext


def test_a_fleet_jobs_handler_runs_its_own_job(aws, monkeypatch, capsys):
    monkeypatch.setenv(environment.TABLE, aws.table)
    monkeypatch.setenv(environment.FLEET, "ops")
    fleet._guarded.clear()
    at = datetime.now(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    tick = {"job": "fleet-job-004", "scheduled_at": at}
    # WHEN job 4's handler gets its tick, twice
    fleet.job_004(tick, LambdaContext())
    again = fleet.job_004(tick, LambdaContext())
    # THEN it ran once, completing its one item (in the ledger), and the redelivery was
    # a duplicate; its metrics carry the fleet
    assert again["decision"] == "duplicate"
    out = capsys.readouterr().out
    assert emf_totals(out)["ItemsCompleted"] == 1 and '"fleet":"ops"' in out.replace(" ", "")
    rows = aws.ddb.scan(TableName=aws.table)["Items"]
    work_id = f"fleet-job-004@{at}:tick"
    assert any(work_id in str(row) for row in rows), work_id
    assert fleet.fleet_jobs(4)[-1].handler == "handlers.fleet.job_004"


def test_a_name_that_is_no_job_is_no_handler():
    with pytest.raises(AttributeError):
        fleet.lambda_handler  # noqa: B018 - the attribute Lambda would look up
