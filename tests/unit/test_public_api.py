"""The public names tests and docs rely on. Changing them is a breaking change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jobguard
from jobguard.ids import new_run_id


def test_public_names_are_pinned():
    assert sorted(jobguard.__all__) == sorted([
        "BatchJob", "BatchReport", "ClaimedItem", "ItemRecord", "ItemState", "OutcomeUnknown",
        "Page", "WorkId",
        "Clock", "ConfigError", "Decision", "GuardedJob", "InvalidTriggerError", "JobConfig",
        "JobGuardError", "LeaseLostError", "LeaseState", "OverlapPolicy", "Outcome", "Run",
        "RunRecord", "RunStatus", "StoreError", "SystemClock", "Trigger", "TriggerKind",
        "aws_client", "current_run", "guarded",
    ])
    assert [p.value for p in jobguard.OverlapPolicy] == ["SKIP", "QUEUE", "COALESCE", "REPLACE"]
    for name in ("ConfigError", "InvalidTriggerError", "LeaseLostError", "StoreError"):
        assert issubclass(getattr(jobguard, name), jobguard.JobGuardError)


@pytest.mark.process
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


@pytest.mark.process
def test_the_runtime_never_imports_the_extras():
    # GIVEN every runtime module (what a production asset carries: LambdaBundle leaves
    # out the cdk constructs, the CLI, the fault harness, the testing kit, the emulator)
    from jobguard.cdk.bundle import DRILL_CODE, NEVER_SHIPPED

    package = Path(jobguard.__file__).parent
    left_out = {part for _, part in NEVER_SHIPPED | DRILL_CODE}
    runtime = sorted(
        "jobguard." + ".".join(p.relative_to(package).with_suffix("").parts)
        for p in package.rglob("*.py")
        if p.relative_to(package).parts[0] not in left_out)
    runtime = [m.removesuffix(".__init__") for m in runtime]
    assert "jobguard.guard" in runtime and "jobguard.destinations" in runtime
    # WHEN all of them are imported in a fresh interpreter
    code = ("import importlib, sys\n"
            f"for m in {runtime!r}: importlib.import_module(m)\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['jobguard', 'cdk'], ['jobguard', 'testing'], ['jobguard', 'local'], "
            "['jobguard', 'cli'], ['jobguard', 'faults'], ['jobguard', 'pytest_plugin'], "
            "['jobguard', 'drill']) or m.split('.')[0] in ('aws_cdk', 'moto', 'pytest'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    # THEN none of the left-out code (nor CDK, moto, pytest) was pulled in
    assert loaded == ""


def test_run_ids_sort_by_start_time():
    ids = [new_run_id(ms) for ms in (1, 2, 10**12, 10**13)]
    assert ids == sorted(ids) and len({len(i) for i in ids}) == 1


@pytest.mark.process
def test_without_an_extra_the_error_names_the_extra_to_install():
    # GIVEN an environment without moto (the [local]/[testing] extras) or aws_cdk ([cdk])
    code = (
        "import sys\n"
        "sys.modules['moto'] = None; sys.modules['aws_cdk'] = None\n"
        "from jobguard.cli import main\n"
        "print('cli', main(['local', '--triggers', '1']))\n"
        "try:\n"
        "    from jobguard.testing import Sandbox\n"
        "    with Sandbox.start(): pass\n"
        "except ImportError as exc: print('kit', exc)\n"
        "try:\n"
        "    import jobguard.cdk\n"
        "except ImportError as exc: print('cdk', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    # THEN each says which extra to install, and the CLI ends without a traceback
    assert "Traceback" not in done.stderr, done.stderr
    assert "pip install 'jobguard[local]'" in done.stderr and "cli 2" in done.stdout
    assert "kit " in done.stdout and "pip install 'jobguard[testing]'" in done.stdout
    assert "cdk " in done.stdout and "pip install 'jobguard[cdk]'" in done.stdout


def test_the_testing_extra_pulls_no_moto_server_and_local_does():
    """GIVEN the extras the wheel declares
    THEN [testing] has moto without its server (no Flask, cfn-lint, docker: minutes and
    hundreds of MB), [local] has the server, the two pin one moto (the emulator patches
    its internals), and dev has both (this repository's tests use the server)."""
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                           .read_text())["project"]["optional-dependencies"]
    testing = {r.name: r for r in map(Requirement, extras["testing"])}
    local = {r.name: r for r in map(Requirement, extras["local"])}
    # (moto[dynamodb] adds docker; jobguard[local] would bring the server back)
    assert "jobguard" not in testing and "docker" not in testing
    assert not testing["moto"].extras & {"server", "all", "dynamodb"}, testing["moto"]
    assert "server" in local["moto"].extras
    assert str(testing["moto"].specifier) == str(local["moto"].specifier) == "==5.2.5"
    (dev,) = [r for r in map(Requirement, extras["dev"]) if r.name == "jobguard"]
    assert {"testing", "local"} <= dev.extras


@pytest.mark.process
def test_with_the_testing_extra_alone_the_server_emulator_names_the_local_extra():
    # GIVEN an environment with moto but not its server (the [testing] extra: no Flask)
    code = (
        "import sys\n"
        "sys.modules['flask'] = None; sys.modules['flask_cors'] = None\n"
        "from datetime import timedelta\n"
        "from jobguard import OverlapPolicy, guarded\n"
        "from jobguard.testing import Sandbox\n"
        "@guarded('x', policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))\n"
        "def handler(event, context): return {'ok': True}\n"
        "with Sandbox.start() as sandbox: print('kit', sandbox.wire(handler).tick())\n"
        "from jobguard.local.emulator import LocalAWS, main\n"
        "try:\n"
        "    LocalAWS().start()\n"
        "except ModuleNotFoundError as exc: print('server', exc)\n"
        "try:\n"
        "    main([])\n"
        "except SystemExit as exc: print('command', exc.code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    # THEN the sandbox ticks a wired job (it needs no server)
    assert "kit {'ok': True}" in done.stdout, done.stdout + done.stderr
    # AND LocalAWS and `python -m jobguard.local.emulator` each say in one line which
    # extra brings the server, without moto's warning (which names moto[server])
    assert "server " in done.stdout and "pip install 'jobguard[local]'" in done.stdout
    assert "command 2" in done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("python -m jobguard.local.emulator: error: ") and (
        "pip install 'jobguard[local]'" in line), line


def test_the_version_is_one_number_in_both_places():
    """``jobguard --version`` falls back to ``jobguard.__version__``; the wheel carries
    pyproject's version: they must be the same number."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                            .read_text())["project"]
    assert jobguard.__version__ == project["version"]
