"""The toolchain is pinned: the CDK CLI in package.json, the libraries in the cdk extra,
and ``cdk.json`` runs the app this suite tests, with the context this suite uses."""

from __future__ import annotations

import json
import re
import tomllib

from infra.app import cdk_json_context
from jobguard.cdk.bundle import POWERTOOLS_LAYER_RELEASES, POWERTOOLS_LAYER_VERSION

from .conftest import ROOT


def test_the_cdk_cli_is_pinned_exactly() -> None:
    package = json.loads((ROOT / "package.json").read_text())
    version = package["devDependencies"]["aws-cdk"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == version


def test_the_cdk_libraries_are_pinned_exactly() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = {re.split(r"[=<>~!]", r, maxsplit=1)[0].strip(): r
             for r in project["optional-dependencies"]["cdk"]}
    for name in ("aws-cdk-lib", "constructs", "cdk-nag", "jsii"):
        assert "==" in extra[name], extra.get(name)


def test_cdk_json_runs_this_app_with_the_context_the_tests_use() -> None:
    config = json.loads((ROOT / "cdk.json").read_text())
    assert config["app"].endswith("-m infra.app")
    assert config["context"] == cdk_json_context()
    assert config["context"]["@aws-cdk/aws-iam:minimizePolicies"] is True


def _dev_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["optional-dependencies"]["dev"]:
        name, _, version = requirement.partition("==")
        if version:
            pins[name.split("[")[0].strip().lower()] = version.strip()
    return pins


def test_the_tests_pin_the_powertools_release_the_default_layer_carries() -> None:
    layer_release = POWERTOOLS_LAYER_RELEASES[POWERTOOLS_LAYER_VERSION]
    assert _dev_pins()["aws-lambda-powertools"] == layer_release


def test_the_tests_run_that_release() -> None:
    import importlib.metadata

    from aws_lambda_powertools.shared.version import VERSION

    release = POWERTOOLS_LAYER_RELEASES[POWERTOOLS_LAYER_VERSION]
    assert release == VERSION, (
        f"the tests import Powertools {VERSION}, the layer {POWERTOOLS_LAYER_VERSION} carries "
        f"{release}: reinstall (make reinstalls when pyproject.toml changed)")
    assert importlib.metadata.version("aws-lambda-powertools") in (VERSION, release)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[_normalized(name.split("[")[0])] = version.strip()
    return pins


def test_the_functions_layer_installs_exactly_what_the_tests_run() -> None:
    """The wheels layer (``jobguard:dependencies=wheels``) pins every runtime dependency,
    boto3 and botocore too, to the version installed here, which is the lock's: what the
    tests imported is what the functions import."""
    import importlib.metadata

    from jobguard.cdk.bundle import layer_requirements

    layer = dict(r.split("==") for r in layer_requirements())
    assert {"aws-lambda-powertools", "pydantic", "pydantic-core", "boto3", "botocore",
            "s3transfer", "typing-extensions"} <= set(layer)
    lock = _lock()
    for name, version in layer.items():
        assert importlib.metadata.version(name) == version, name  # what the tests import
        assert lock.get(name) == version, f"{name}: layer {version}, lock {lock.get(name)}"


def test_the_layer_is_closed_under_its_requirements() -> None:
    """Nothing is left for pip to choose: every requirement of every pinned distribution
    that applies on Lambda (no extra, CPython 3.14 on Linux arm64) is pinned too."""
    import importlib.metadata

    from packaging.requirements import Requirement

    from jobguard.cdk.bundle import LAMBDA_MARKERS, layer_requirements

    layer = dict(r.split("==") for r in layer_requirements())
    for name in ["jobguard", *layer]:
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(LAMBDA_MARKERS):
                assert _normalized(requirement.name) in {*layer, "jobguard"}, (name, text)


def test_a_host_layer_never_shadows_the_emulators_sdk() -> None:
    from jobguard.cdk.bundle import layer_requirements

    host = {r.split("==")[0] for r in layer_requirements(host=True)}
    assert {"pydantic", "aws-lambda-powertools"} <= host
    assert not {"boto3", "botocore", "s3transfer"} & host  # s3transfer: only boto3 needs it
