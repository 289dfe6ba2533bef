"""The README's "Install it in your own project" and "Testing your handler", done as
written by someone outside this repository: build the wheel, install it with its
``cdk`` and ``testing`` extras into a new virtual environment in a temporary folder,
write the README's files (each ``# file: PATH`` snippet) into an empty project there,
synthesize its stack and run its tests with the installed package alone.

The installed wheel is tests/ship/_user.py's (one per session)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests._docs import pages

from ._user import ROOT, _run, _user_env

FILE_SNIPPET = re.compile(r"```python\n# file: (\S+)\n(.*?)```", re.S)

pytestmark = pytest.mark.timeout(900)


def readme_files() -> dict[str, str]:
    """Each ``# file: PATH`` Python snippet of the docs (the README's five-minute start,
    the testing guide's further tests), by path."""
    return {path: body for doc in pages() for path, body in FILE_SNIPPET.findall(doc.read_text())}


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
    assert not any(f.startswith(("jobguard/cdk/", "jobguard/local/", "jobguard/testing/",
                                 "jobguard/cli/"))
                   for f in files)
    assert not {"jobguard/pytest_plugin.py", "jobguard/_offline.py"} & files


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


def test_the_tutorials_drillable_app_synthesizes_drillable(installed: Path,
                                                           project: Path) -> None:
    # GIVEN the README's app.py with the tutorial's one-line change (its LambdaBundle reads
    # the drills option from the CDK context)
    from .test_readme import DRILLABLE

    app = (project / "app.py").read_text()
    line = ('        code = LambdaBundle(self, "Code", packages=["myjobs"])'
            "  # jobguard + your package\n")
    assert app.count(line) == 1
    (project / "drillable.py").write_text(app.replace(line, DRILLABLE))
    # WHEN it is synthesized as `python -m jobguard.local.up ... -c drills=true` deploys it
    context = {"drills": "true", "jobguard:local": "true"}
    env = {**_user_env(installed), "CDK_OUTDIR": "cdk.out.drills",
           "CDK_CONTEXT_JSON": json.dumps(context)}
    _run([str(installed / "python"), "drillable.py"], cwd=project, env=env)
    # THEN the job's function honours drill switches, and the output says it is drillable
    template = json.loads((project / "cdk.out.drills" / "Billing.template.json").read_text())
    mailer = next(r["Properties"] for r in template["Resources"].values()
                  if r["Type"] == "AWS::Lambda::Function"
                  and r["Properties"].get("Handler") == "myjobs.invoice_mailer.lambda_handler")
    assert mailer["Environment"]["Variables"].get("JOBGUARD_DRILLS") == "1"
    output = json.loads(_joined(template["Outputs"]["InvoiceMailerJob"]["Value"]))
    assert output["drills"] is True, output
