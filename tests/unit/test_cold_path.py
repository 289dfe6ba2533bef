"""What a guarded Lambda pays on its cold start: the modules its first invocation loads,
and the botocore loader jobguard builds its clients with (``bench/coldstart.py``
measures the time; these pin what was taken off the path, so a regression fails here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.exceptions import UnknownServiceError
from botocore.loaders import create_loader

from jobguard import _clients

# Off the cold path of a handler that claims no work items: the ledger (imported when a
# run first claims or recovers), boto3 (jobguard builds botocore clients), Powertools
# (jobguard writes its own log and EMF lines; the batch utility is for queued triggers,
# the Tracer for a job that asks for tracing) and pydantic.
NOT_ON_THE_COLD_PATH = (
    "jobguard.batch", "jobguard.claims", "jobguard.workitems", "jobguard.dynamodb_items",
    "jobguard.recovery", "jobguard.destinations", "boto3", "aws_xray_sdk", "pydantic",
    "aws_lambda_powertools",
)

_FIRST_INVOCATION = """
import json, sys
from datetime import timedelta
from jobguard import OverlapPolicy, guarded

@guarded("cold-path", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=5))
def lambda_handler(event, context):
    return {"ok": True}

result = lambda_handler({"job": "cold-path", "scheduled_at": sys.argv[1]}, None)
from jobguard._clients import shared_loader
print(json.dumps({"result": result, "modules": sorted(sys.modules),
                  "listed_services": [k for k in shared_loader()._cache
                                      if k[0] == "list_available_services"]}))
"""


@pytest.mark.server
@pytest.mark.process
def test_a_guarded_handlers_first_invocation_loads_no_ledger_no_boto3_and_lists_no_services():
    from jobguard.dynamodb import create_table
    from jobguard.local.emulator import LocalAWS

    with LocalAWS() as aws:
        table = "cold-path"
        create_table(aws.client("dynamodb"), table)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "JOBGUARD_", "POWERTOOLS_"))}
        env.update(aws.env(), JOBGUARD_TABLE=table)
        # GIVEN a fresh interpreter: a guarded handler module, then its first invocation
        # (a tick of this minute: a fixed time would turn stale an hour later)
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        done = subprocess.run([sys.executable, "-c", _FIRST_INVOCATION,
                               now.strftime("%Y-%m-%dT%H:%M:%SZ")], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    # THEN it ran (the lease taken and released against the emulator) ...
    assert seen["result"] == {"ok": True}
    assert "jobguard.dynamodb" in seen["modules"] and "botocore.client" in seen["modules"]
    # ... without loading what it does not use, nor listing every botocore service
    assert [m for m in NOT_ON_THE_COLD_PATH if m in seen["modules"]] == []
    assert seen["listed_services"] == []


@pytest.mark.process
def test_importing_jobguard_loads_no_ledger_and_its_names_still_import():
    code = ("import sys, jobguard\n"
            "before = [m for m in ('jobguard.batch', 'jobguard.workitems', 'jobguard.claims')"
            " if m in sys.modules]\n"
            "from jobguard import BatchJob, ItemState, WorkId\n"
            "from jobguard import *\n"
            "print(before, BatchJob.__module__, ItemState.__module__, WorkId.__module__,"
            " all(n in globals() for n in jobguard.__all__), 'Page' in dir(jobguard))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["[]", "jobguard.batch", "jobguard.workitems", "jobguard.workitems",
                   "True", "True"]


def test_an_unknown_public_name_is_an_attribute_error():
    import jobguard

    with pytest.raises(AttributeError, match="has no attribute 'BatchJobs'"):
        jobguard.BatchJobs  # noqa: B018


@pytest.mark.parametrize("service", ["dynamodb", "sqs", "s3", "lambda"])
def test_jobguards_loader_loads_what_botocores_loader_loads(service):
    ours, botocores = _clients.shared_loader.__wrapped__(), create_loader()
    for kind in ("service-2", "endpoint-rule-set-1", "paginators-1"):
        assert ours.load_service_model(service, kind) == botocores.load_service_model(
            service, kind)
    version = botocores.determine_latest_version(service, "service-2")
    assert ours.load_service_model(service, "service-2", version) == \
        botocores.load_service_model(service, "service-2", version)
    for name in ("endpoints", "partitions", "sdk-default-configuration", "_retry"):
        assert ours.load_data(name) == botocores.load_data(name)
    # without listing every service on the search path, nor parsing through OrderedDict
    assert not [k for k in ours._cache if k[0] == "list_available_services"]
    assert type(ours.load_data("endpoints")) is dict


def test_an_unknown_service_is_botocores_own_error():
    ours, botocores = _clients.shared_loader.__wrapped__(), create_loader()
    with pytest.raises(UnknownServiceError) as theirs:
        botocores.load_service_model("no-such-service", "service-2")
    with pytest.raises(UnknownServiceError) as mine:
        ours.load_service_model("no-such-service", "service-2")
    assert str(mine.value) == str(theirs.value)


def test_aws_data_path_comes_first_as_in_botocore(tmp_path: Path, monkeypatch):
    # GIVEN a model of a service of one's own on AWS_DATA_PATH
    model = {"version": "2.0", "metadata": {"apiVersion": "2026-01-01",
                                            "endpointPrefix": "mine", "protocol": "json",
                                            "serviceId": "Mine", "signatureVersion": "v4"},
             "operations": {}, "shapes": {}}
    folder = tmp_path / "mine" / "2026-01-01"
    folder.mkdir(parents=True)
    (folder / "service-2.json").write_text(json.dumps(model))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    # THEN jobguard's loader finds it as botocore's does, and still finds DynamoDB
    ours = _clients.shared_loader.__wrapped__()
    assert ours.load_service_model("mine", "service-2") == model
    assert ours.search_paths == create_loader(str(tmp_path)).search_paths
    assert ours.load_service_model("dynamodb", "service-2")["metadata"][
        "serviceId"] == "DynamoDB"


@pytest.mark.parametrize("missing", ["instance_cache"])
def test_a_botocore_of_another_layout_gets_its_own_loader_back(monkeypatch, missing):
    # GIVEN a botocore whose loaders module lacks a private name jobguard's loader builds
    # on (an upgrade renames it; boto3 is not pinned): AWS clients still work, with
    # botocore's own loader (it was an ImportError on every client)
    import botocore.loaders

    monkeypatch.delattr(botocore.loaders, missing)
    monkeypatch.setattr(_clients, "_service_loader_class",
                        _clients._service_loader_class.__wrapped__)
    ours = _clients.shared_loader.__wrapped__()
    assert type(ours) is botocore.loaders.Loader
    assert ours.load_service_model("dynamodb", "service-2")["metadata"][
        "serviceId"] == "DynamoDB"
