"""The README's "Install it in your own project" and "Testing your handler", done as
written by someone outside this repository: build the wheel, install it with its
``cdk`` and ``testing`` extras into a new virtual environment in a temporary folder,
write the README's files (each ``# file: PATH`` snippet) into an empty project there,
synthesize its stack and run its tests with the installed package alone.

The install pins every dependency to the version this repository's environment tested
(a constraints file from it); pip fetches from its cache or the package index. The
jsii package cache is shared with the repository's, so the synth stays fast."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobguard.local.node import pinned_node

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FILE_SNIPPET = re.compile(r"```python\n# file: (\S+)\n(.*?)```", re.S)

pytestmark = pytest.mark.timeout(900)


def readme_files() -> dict[str, str]:
    """Each ``# file: PATH`` Python snippet of the README, by path."""
    return {path: body for path, body in FILE_SNIPPET.findall(README.read_text())}


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel, built from the repository's files and installed with its extras into
    a virtual environment outside the repository; yields that environment's bin/."""
    work = tmp_path_factory.mktemp("user")
    clone = work / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(ROOT / "lib", clone / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # the README's commands, in the clone then in the user's project
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", "."], cwd=clone)
    (wheel,) = (clone / "dist").glob("jobguard-*.whl")
    _run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    frozen = _run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=work).stdout
    constraints = work / "constraints.txt"
    constraints.write_text("\n".join(
        line for line in frozen.splitlines()
        if not line.startswith(("jobguard", "-e")) and " @ " not in line))
    bin_dir = work / "venv" / "bin"
    _run([str(bin_dir / "pip"), "install", "-q", "--no-compile", "--disable-pip-version-check",
          "--constraint", str(constraints), f"{wheel}[cdk,testing]"], cwd=work, timeout=900)
    yield bin_dir


@pytest.fixture(scope="module")
def project(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty folder with the README's files in it (and the empty __init__.py it
    mentions)."""
    root = tmp_path_factory.mktemp("billing")
    files = readme_files()
    assert {"myjobs/jobs.py", "myjobs/invoice_mailer.py", "app.py",
            "tests/test_invoice_mailer.py"} <= set(files)
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    (root / "myjobs" / "__init__.py").write_text("")
    return root


def _user_env(installed: Path) -> dict[str, str]:
    """A user's shell: the venv activated, nothing of this repository on the path; their
    Node a supported LTS (the one this repository pins, given to jsii as JSII_NODE)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JOBGUARD_", "AWS_", "PYTEST_"))}
    ours = str(Path(sys.executable).parent)  # make puts this repository's .venv/bin first
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours]
    env["PATH"] = os.pathsep.join([str(installed), *path])
    node = pinned_node()
    if node is not None:
        env["JSII_NODE"] = str(node)
    env["VIRTUAL_ENV"] = str(installed.parent)
    env.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def test_the_installed_package_is_the_wheel_not_this_repository(installed: Path,
                                                                project: Path) -> None:
    done = _run([str(installed / "python"), "-c",
                 "import jobguard, jobguard.cdk, jobguard.testing, importlib.metadata as m; "
                 "print(jobguard.__file__); "
                 "print([e.value for e in m.entry_points(group='pytest11')])"],
                cwd=project, env=_user_env(installed))
    where, plugins = done.stdout.splitlines()
    assert where.startswith(str(installed.parent)) and str(ROOT) not in where
    assert "jobguard.pytest_plugin" in plugins
    version = _run([str(installed / "jobguard"), "--version"], cwd=project,
                   env=_user_env(installed))
    assert "0.1.0" in version.stdout


def test_the_readme_stack_synthesizes_outside_the_repository(installed: Path,
                                                            project: Path) -> None:
    # WHEN the user runs `CDK_OUTDIR=cdk.out python app.py` in their project
    env = {**_user_env(installed), "CDK_OUTDIR": "cdk.out"}
    done = _run([str(installed / "python"), "app.py"], cwd=project, env=env)
    assert "end-of-life" not in done.stdout + done.stderr  # jsii's banner: Node is supported
    # THEN the template has their job's function, on their handler, in an asset that
    # holds jobguard's runtime and their package only
    template = json.loads((project / "cdk.out" / "Billing.template.json").read_text())
    functions = {k: v["Properties"] for k, v in template["Resources"].items()
                 if v["Type"] == "AWS::Lambda::Function"}
    handlers = {p.get("Handler") for p in functions.values()}
    assert "myjobs.invoice_mailer.lambda_handler" in handlers
    mailer = next(p for p in functions.values()
                  if p.get("Handler") == "myjobs.invoice_mailer.lambda_handler")
    assert "SENT_TABLE" in mailer["Environment"]["Variables"]
    assert "JOBGUARD_TABLE" in mailer["Environment"]["Variables"]
    # every alarm reaches the person the README names, on ALARM and on OK
    alarms = [v["Properties"] for v in template["Resources"].values()
              if v["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms
    for alarm in alarms:
        assert alarm.get("AlarmActions") and alarm["AlarmActions"] == alarm.get("OKActions")
    assert [v["Properties"]["Endpoint"] for v in template["Resources"].values()
            if v["Type"] == "AWS::SNS::Subscription"] == ["oncall@example.com"]
    # the outputs `jobguard --stack Billing` reads, as the installed jobguard reads them
    outputs = {key: _joined(output["Value"]) for key, output in template["Outputs"].items()}
    assert {"TableName", "AlarmTopicArn", "InvoiceMailerJob"} <= set(outputs)
    read = _run([str(installed / "python"), "-c",
                 "import json, sys; from jobguard.deployment import Deployment; "
                 "d = Deployment.from_outputs('Billing', json.loads(sys.argv[1])); "
                 "j = d.jobs['invoice-mailer']; print(j.function, j.runbook, j.drills)",
                 json.dumps(outputs)], cwd=project, env=env)
    function = next(k for k, v in template["Resources"].items()
                    if v["Properties"].get("Handler") == "myjobs.invoice_mailer.lambda_handler")
    assert read.stdout.split() == [function, "https://wiki.example.com/billing/jobs", "False"]
    (asset,) = {d for d in (project / ".local" / "cdk-build").glob("code-*")}
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    assert {"myjobs/invoice_mailer.py", "myjobs/jobs.py", "jobguard/guard.py"} <= files
    assert not any(f.startswith(("jobguard/cdk/", "jobguard/local/")) for f in files)
    assert not {"jobguard/testing.py", "jobguard/pytest_plugin.py", "jobguard/_offline.py",
                 "jobguard/cli.py"} & files


def test_the_readme_stack_without_an_alarm_destination_stops_with_one_line(
        installed: Path, project: Path) -> None:
    # GIVEN the README's app.py with the GuardedJob's alarms= left out
    app = (project / "app.py").read_text()
    assert app.count("bundle=code, alarms=alarms)") == 1
    (project / "no_alarms.py").write_text(app.replace("bundle=code, alarms=alarms)",
                                                      "bundle=code)"))
    # WHEN the user synthesizes it
    done = subprocess.run([str(installed / "python"), "no_alarms.py"], cwd=project,
                          env={**_user_env(installed), "CDK_OUTDIR": "cdk.out.no-alarms"},
                          capture_output=True, text=True, timeout=600, check=False)
    # THEN one line names the option, and the exit says it failed
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        "jobguard: alarms: GuardedJob 'InvoiceMailer' has no alarm destination: pass "
        'alarms=alarms_to_email("oncall@example.com"), alarms_to_topic(topic) or '
        'alarms_off(reason="...")'], done.stderr


def _joined(value: object) -> str:
    """A template value as the deployed string, roughly (a Ref becomes its logical id)."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict), value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_joined(part) for part in parts)
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def test_the_readme_tests_pass_with_the_installed_plugin(installed: Path,
                                                         project: Path) -> None:
    # WHEN the user runs `python -m pytest -q` in their project (the plugin comes from
    # the wheel)
    done = _run([str(installed / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=project, env=_user_env(installed))
    # THEN what the README says it prints
    assert re.search(r"^4 passed", done.stdout, re.M), done.stdout
