"""What a guarded Lambda pays on its cold start: the modules its first invocation loads,
and the botocore loader jobguard builds its clients with (``bench/coldstart.py``
measures the time; these pin what was taken off the path, so a regression fails here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import UnknownServiceError
from botocore.loaders import create_loader

from jobguard import _clients


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
