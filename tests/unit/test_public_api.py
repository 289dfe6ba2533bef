"""The public names tests and docs rely on. Changing them is a breaking change."""

from __future__ import annotations

import subprocess
import sys

import jobguard
from jobguard.ids import new_run_id


def test_public_names_are_pinned():
    assert sorted(jobguard.__all__) == sorted([
        "BatchJob", "BatchReport", "ClaimedItem", "ItemRecord", "ItemState", "OutcomeUnknown",
        "Page", "WorkId",
        "Clock", "ConfigError", "Decision", "GuardedJob", "InvalidTriggerError", "JobConfig",
        "JobGuardError", "LeaseLostError", "LeaseState", "OverlapPolicy", "Outcome", "Run",
        "RunRecord", "RunStatus", "StoreError", "SystemClock", "Trigger", "TriggerKind",
        "current_run", "guarded",
    ])
    assert [p.value for p in jobguard.OverlapPolicy] == ["SKIP", "QUEUE", "COALESCE", "REPLACE"]
    for name in ("ConfigError", "InvalidTriggerError", "LeaseLostError", "StoreError"):
        assert issubclass(getattr(jobguard, name), jobguard.JobGuardError)


def test_importing_jobguard_keeps_heavy_modules_off_the_cold_start():
    code = (
        "import sys, jobguard; from jobguard.triggers import parse_event; "
        "parse_event({'job': 'j', 'scheduled_at': '2026-11-29T07:35:00Z'}, job='j', "
        "policy=jobguard.OverlapPolicy.SKIP); "
        "print(','.join(m for m in ('boto3', 'botocore', 'aws_xray_sdk', 'moto', 'pydantic', "
        "'pydantic_core', 'aws_lambda_powertools.utilities.batch') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == ""


def test_run_ids_sort_by_start_time():
    ids = [new_run_id(ms) for ms in (1, 2, 10**12, 10**13)]
    assert ids == sorted(ids) and len({len(i) for i in ids}) == 1
