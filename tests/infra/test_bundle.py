"""Packaging without Docker: the code asset, the dependency layer for Lambda's platform,
and host-platform dependencies for the local emulator (a context value, not a stack)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.settings import StackSettings
from infra.stack import HANDLER_PACKAGES
from jobguard.cdk.bundle import (
    Dependencies,
    LambdaBundle,
    build_layer,
    layer_requirements,
    pip_command,
    stage_code,
)


def _package(root: Path, name: str, files: dict[str, str]) -> Path:
    package = root / name
    for relative, text in {"__init__.py": "", **files}.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(text)
    return package


def test_staged_code_is_content_addressed_and_leaves_out_bytecode(tmp_path: Path) -> None:
    # GIVEN a handler package with a stray bytecode cache
    package = _package(tmp_path / "src", "jobs", {"sync.py": "X = 1\n",
                                                 "__pycache__/sync.cpython-311.pyc": "junk"})
    build = tmp_path / "build"
    # WHEN it is staged twice, then again after an edit
    first = stage_code([package], build)
    again = stage_code([package], build)
    (package / "sync.py").write_text("X = 2\n")
    edited = stage_code([package], build)
    # THEN the same content is one folder, an edit is a new one, and no bytecode ships
    assert first == again != edited
    assert sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()) == [
        "jobs/__init__.py", "jobs/sync.py"]


def test_staged_code_nobody_used_for_a_week_is_pruned(tmp_path: Path) -> None:
    import os
    import time

    package = _package(tmp_path / "src", "jobs", {"sync.py": "X = 1\n"})
    build = tmp_path / "build"
    old = stage_code([package], build)
    week_ago = time.time() - 8 * 86400
    os.utime(old, (week_ago, week_ago))
    (package / "sync.py").write_text("X = 2\n")
    new = stage_code([package], build)
    assert new.is_dir() and not old.exists()
    # the folder in use is never pruned, however old
    os.utime(new, (week_ago, week_ago))
    assert stage_code([package], build) == new and new.is_dir()


def test_the_emulator_and_the_operator_tools_never_ship(tmp_path: Path) -> None:
    import jobguard

    jobguard_dir = Path(str(jobguard.__file__)).parent
    staged = stage_code([jobguard_dir], tmp_path)
    assert (staged / "jobguard" / "guard.py").is_file()
    assert not (staged / "jobguard" / "local").exists()
    assert not (staged / "jobguard" / "cli").exists()
    assert not (staged / "jobguard" / "timeline").exists()


def test_layer_requirements_are_the_runtime_dependencies_pinned_to_what_is_installed() -> None:
    requirements = layer_requirements()
    names = {r.split("==")[0].lower() for r in requirements}
    # the closure, the SDK included (tests/infra/test_pins.py compares it with the lock)
    assert {"aws-lambda-powertools", "pydantic", "boto3", "botocore"} <= names
    assert all("==" in r for r in requirements)


def test_lambda_wheels_are_binary_only_for_arm64_and_the_runtimes_python(tmp_path: Path) -> None:
    command = pip_command(tmp_path / "python", ["pydantic==2.0"], host=False)
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert "--only-binary=:all:" in command
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == "3.14"
    assert command[command.index("--implementation") + 1] == "cp"
    assert command[command.index("--target") + 1] == str(tmp_path / "python")
    assert command[-1] == "pydantic==2.0"


def test_host_wheels_are_for_this_interpreter(tmp_path: Path) -> None:
    command = pip_command(tmp_path / "python", ["pydantic==2.0"], host=True)
    assert "--platform" not in command and "--python-version" not in command
    assert "--only-binary=:all:" in command


def test_a_layer_is_built_once_then_taken_from_the_cache(tmp_path: Path) -> None:
    runs: list[list[str]] = []

    def fake_pip(command: list[str]) -> None:
        runs.append(command)
        target = Path(command[command.index("--target") + 1])
        (target / "pydantic").mkdir(parents=True)
        (target / "pydantic" / "__init__.py").write_text("")
        (target / "bin").mkdir()

    first = build_layer(["pydantic==2.0"], host=False, build_dir=tmp_path, run=fake_pip)
    second = build_layer(["pydantic==2.0"], host=False, build_dir=tmp_path, run=fake_pip)
    assert first == second and len(runs) == 1
    assert (first / "python" / "pydantic" / "__init__.py").is_file()
    assert not (first / "python" / "bin").exists()  # console scripts do not belong in a layer
    host = build_layer(["pydantic==2.0"], host=True, build_dir=tmp_path, run=fake_pip)
    assert host != first and len(runs) == 2


def test_local_context_deploys_host_dependencies_instead_of_the_public_layer(
        tmp_path: Path) -> None:
    # GIVEN -c jobguard:local=true (pip replaced: the layer's contents are not the point)
    settings = StackSettings.from_context({"jobguard:local": "true"})
    assert settings.dependencies is Dependencies.HOST

    def fake_pip(command: list[str]) -> None:
        assert "--platform" not in command
        Path(command[command.index("--target") + 1]).mkdir(parents=True)

    stack = cdk.Stack(cdk.App(), "Local")
    bundle = LambdaBundle(stack, "Bundle", packages=HANDLER_PACKAGES,
                          dependencies=settings.dependencies, build_dir=tmp_path, run=fake_pip)
    from aws_cdk import aws_lambda as lambda_

    lambda_.Function(stack, "Fn", runtime=bundle.runtime, architecture=bundle.architecture,
                     code=bundle.code, layers=bundle.layers, handler="handlers.crm_sync.x")
    # THEN the function's layer is an asset of this stack, not the Powertools ARN
    template = Template.from_stack(stack)
    [layer_id] = template.find_resources("AWS::Lambda::LayerVersion")
    [function] = template.find_resources("AWS::Lambda::Function").values()
    assert function["Properties"]["Layers"] == [{"Ref": layer_id}]
    assert "017000801446" not in json.dumps(template.to_json())


def _files(code_dir: Path) -> set[str]:
    return {p.relative_to(code_dir).as_posix() for p in code_dir.rglob("*") if p.is_file()}


def test_the_production_asset_carries_no_drill_cli_fault_or_test_code(synth) -> None:
    files = _files(synth.stack.bundle.code_dir)
    shipped_tools = {f for f in files if f.startswith(("jobguard/drill/", "jobguard/local/",
                                                       "jobguard/timeline/", "jobguard/cdk/",
                                                       "jobguard/testing/", "jobguard/cli/"))
                     or f in ("jobguard/faults.py",
                              "jobguard/pytest_plugin.py", "jobguard/_offline.py")}
    assert shipped_tools == set()
    assert {"jobguard/guard.py", "jobguard/dynamodb.py", "jobguard/_drills.py",
            "handlers/crm_sync.py", "handlers/report_export.py",
            "jobguard/functions/recovery.py", "jobguard/functions/reconciler.py"} <= files


def test_a_drill_deployments_asset_carries_the_switches_and_no_tools(drill) -> None:
    stack, _, _ = drill
    files = _files(stack.bundle.code_dir)
    assert "jobguard/drill/switches.py" in files
    assert not {"jobguard/faults.py",
                "jobguard/pytest_plugin.py", "jobguard/_offline.py"} & files
    assert not any(f.startswith(("jobguard/local/", "jobguard/cdk/", "jobguard/testing/",
                                 "jobguard/cli/"))
                   for f in files)


def test_every_handler_imports_from_the_production_asset_alone(synth) -> None:
    # GIVEN only the asset on the path (site-packages stand in for the layer): each
    # handler module loads as Lambda loads it, and no drill code is imported
    import subprocess

    code_dir = synth.stack.bundle.code_dir
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import importlib\n"
        "for m in ('handlers.crm_sync', 'handlers.report_export', 'jobguard.functions.recovery',\n"
        "          'jobguard.functions.reconciler'):\n"
        "    importlib.import_module(m)\n"
        "import jobguard\n"
        "assert jobguard.__file__.startswith(sys.argv[1]), jobguard.__file__\n"
        "assert not [m for m in sys.modules if m.startswith('jobguard.drill')]\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-B", "-c", script, str(code_dir)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "AWS_REGION": "eu-west-1"},
                          cwd=code_dir, check=False)
    assert done.stdout.strip() == "ok", done.stderr
