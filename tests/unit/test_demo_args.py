"""`make demo DEMO_ARGS=...`: a mistyped drill or job is refused before anything starts
(it used to deploy for a minute and then die with a traceback)."""

from __future__ import annotations

import pytest

from jobguard.local import demo


@pytest.mark.parametrize(("argv", "says"), [
    (["--only", "lease-expiri"], "error: --only: unknown drill lease-expiri"),
    (["--only", "lease-expiry", "--only", "partial-failur"], "did you mean partial-failure?"),
    (["--job", "crm-synk"], "error: --job: 'crm-synk' is not a job of this stack"),
    (["--job", "crm-sync", "--only", "second-worker"], "(drills: crm-sync:overlap"),
])
def test_a_mistyped_selection_is_refused_before_the_local_aws_starts(monkeypatch, argv, says):
    started: list[bool] = []
    monkeypatch.setattr(demo.LocalStack, "start",
                        classmethod(lambda cls, **_: started.append(True)))  # a tripwire
    with pytest.raises(SystemExit) as exited:
        demo.main(argv)
    assert says in str(exited.value) and not started


def test_the_kept_demos_printed_commands_work_with_the_exports_it_prints(monkeypatch):
    """Issue 29 row 3: the printed next step works verbatim: every command on the lines
    `--keep` prints parses, and after the printed exports each finds what it needs (the
    endpoint, credentials, region, table, jobs and, for `drill`, the kept stack)."""
    import shlex

    from jobguard import cli

    # GIVEN what `make demo DEMO_ARGS="--keep"` prints
    printed = demo.kept_lines(endpoint="http://127.0.0.1:4566", table="JobGuard-local-Jobs",
                              stack="JobGuard-local", pid=4242, workdir="/tmp/ms", cli="jobguard")
    lines = [line.strip() for line in printed.splitlines()]
    (exports,) = [line for line in lines if line.startswith("export ")]
    exported = dict(word.split("=", 1) for word in shlex.split(exports)[1:])
    # THEN the exports name the endpoint, credentials, region, table, stack and jobs
    assert exported["AWS_ENDPOINT_URL"] == "http://127.0.0.1:4566"
    assert exported["JOBGUARD_STACK"] == "JobGuard-local"
    assert exported["JOBGUARD_TABLE"] == "JobGuard-local-Jobs"
    assert {"AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "JOBGUARD_JOBS_MODULE"} <= set(exported)
    for name in [*exported, "AWS_PROFILE"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    # AND each printed command parses, and `drill` reads the stack the exports name
    commands = [shlex.split(c.replace("[--html timeline.html]", ""))
                for line in lines if line.startswith("jobguard ") for c in line.split(";")]
    assert [c[1] for c in commands] == ["status", "runs", "drill", "timeline"]
    for command in commands:
        args = cli.build_parser().parse_args(command[1:])
        if command[1] == "drill":
            assert cli._stack(args, cli.DRILL_STACK) == ("JobGuard-local", "JOBGUARD_STACK")
    assert "When done: make demo-stop (stops pid 4242, " in printed
