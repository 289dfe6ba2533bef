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


def test_a_selection_of_drills_writes_its_own_page_never_the_whole_demos(tmp_path):
    """Issue 31, item 5.4: `make demo DEMO_ARGS="--job report-export"` after a full demo
    replaced .local/drills.html, the page of every drill, and said nothing."""
    every = demo.drills_page_path(tmp_path, only=[], job=None)
    assert every == tmp_path / "drills.html"
    pages = {every,
             demo.drills_page_path(tmp_path, only=[], job="report-export"),
             demo.drills_page_path(tmp_path, only=[], job="crm-sync"),
             demo.drills_page_path(tmp_path, only=["lease-expiry"], job=None),
             demo.drills_page_path(tmp_path, only=["lease-expiry"], job="crm-sync"),
             demo.drills_page_path(tmp_path, only=["crm-sync:overlap"], job="crm-sync")}
    assert len(pages) == 6 and all(p.parent == tmp_path for p in pages)  # one page each
    assert demo.drills_page_path(tmp_path, only=[], job="report-export").name == \
        "drills-report-export.html"
    # one selection, one page, whatever the order it was given in
    assert demo.drills_page_path(tmp_path, only=["b", "a", "b"], job=None) == \
        demo.drills_page_path(tmp_path, only=["a", "b"], job=None)
    # a name is a file name: no folder, no hidden file, whatever a drill is called
    odd = demo.drills_page_path(tmp_path, only=["../x", "a/b", ".."], job=None)
    assert odd.parent == tmp_path and odd.name.startswith("drills-")
    long = demo.drills_page_path(tmp_path, only=[f"drill-{n}" for n in range(60)], job=None)
    assert long.parent == tmp_path and len(long.name) < 140


def test_the_demo_says_which_page_it_wrote_and_that_the_whole_demos_page_is_kept(tmp_path):
    every = tmp_path / "drills.html"
    lines = demo.page_lines(every)
    assert lines[0] == f"drills page (every drill's checks and timeline): {every}"
    selection = demo.drills_page_path(tmp_path, only=[], job="report-export")
    assert "make demo with no DEMO_ARGS writes the page of every drill" in \
        demo.page_lines(selection)[0]
    every.write_text("the full demo's page")
    said = demo.page_lines(selection)
    assert said[0].startswith("drills page of this selection")
    assert f"{every}, the page of every drill, is left as it was" in said[0]
    assert said[0].endswith(f": {selection}") and said[1].endswith(selection.name)
