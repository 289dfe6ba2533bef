"""Issue 34, finding 5: a row under ``RUN#`` that is not a readable run record (anyone
who may write the table can leave one: the job's own role, a hand edit, an old backup,
another tool) hides nothing. ``jobguard runs``, ``status`` and ``run`` name it (its
sort key and what is wrong) in every output format and list the rest; the timeline and
the readers in ``jobguard.testing`` go on past it. In process, on the in-process
emulator, the garbage written with a raw ``PutItem``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jobguard._run_rows import read_run_row
from jobguard.cli import RUN_KEYS, main
from jobguard.dynamodb import DynamoJobStore
from jobguard.ids import new_run_id
from jobguard.records import DamagedRun, Decision, RunRecord, RunStatus
from jobguard.schema import job_pk, run_sk
from tests._cli_table import cli_table

T0 = 1_796_000_000_000
JOB = "crm-sync"


@pytest.fixture
def env(monkeypatch) -> Iterator[tuple[Any, DynamoJobStore]]:
    with cli_table(monkeypatch, jobs_module="handlers.jobs") as (ddb, name):  # crm-sync
        yield ddb, DynamoJobStore(name, client=ddb)


def _good(store: DynamoJobStore, at_ms: int, status: RunStatus = RunStatus.SUCCEEDED
          ) -> RunRecord:
    record = RunRecord(job=JOB, run_id=new_run_id(at_ms), trigger_id=f"{JOB}@t{at_ms}",
                       trigger_kind="tick", policy="SKIP", decision=Decision.RAN,
                       status=status, started_at_ms=at_ms, ended_at_ms=at_ms + 500, fence=1)
    store.put_run(record, ttl_epoch_s=at_ms // 1000 + 86_400)
    return record


@pytest.fixture
def log(env) -> dict[str, Any]:
    """GIVEN crm-sync's run log: three good runs and, between them, three rows that are
    not run records, written with a raw PutItem: one with nothing but its key, one with
    every attribute of the wrong type (and a status of 300,000 characters), one under a
    key whose id is not a run id with an id attribute that differs from it."""
    ddb, store = env
    old = _good(store, T0)
    failed = _good(store, T0 + 40_000, RunStatus.FAILED)
    new = _good(store, T0 + 80_000)
    bare = new_run_id(T0 + 10_000)
    typed = new_run_id(T0 + 20_000)
    pk = {"S": job_pk(JOB)}
    garbage = [
        {"pk": pk, "sk": {"S": run_sk(bare)}},
        {"pk": pk, "sk": {"S": run_sk(typed)}, "job": {"S": JOB}, "run_id": {"S": typed},
         "status": {"S": "x" * 300_000}, "decision": {"N": "3"},
         "started_at_ms": {"S": "yesterday"}, "ended_at_ms": {"N": "1e30"},
         "fence": {"N": "1.5"}, "error": {"M": {"nested": {"S": "map"}}},
         "owner": {"BOOL": True}, "trigger_id": {"L": [{"S": "a"}]},
         "blob": {"S": "y" * 100_000}},
        {"pk": pk, "sk": {"S": "RUN#not-a-run-id"}, "job": {"S": JOB},
         "run_id": {"S": new_run_id(T0 + 30_000)}, "status": {"S": "succeeded"}},
    ]
    for item in garbage:
        ddb.put_item(TableName=store.table_name, Item=item)
    return {"store": store, "good": [new, failed, old], "bare": bare, "typed": typed}


PROBLEMS = {
    "bare": "job is missing; run_id is missing; status is missing",
    "typed": ("status 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (300,000 characters) "
              "is not a run status jobguard writes; decision 3 is not a run decision "
              "jobguard writes; owner is a boolean, not text; error is a map, not text; "
              "trigger_id is a list, not text; started_at_ms is text, not a whole number; "
              "ended_at_ms 1000000000000000000000000000000 is not a time in milliseconds; "
              "fence is a fraction, not a whole number"),
    "key": "run_id '01M",  # ... 'is not the id in its key'
}


def _damaged(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["damaged"]["sk"]: r for r in rows if r["damaged"]}


@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_runs_lists_every_good_run_and_names_each_damaged_row(log, capsys, output):
    """WHEN `jobguard runs` lists the log in each format THEN exit 0, the three good runs
    are there, and each damaged row is in its place, named by its key, with what is
    wrong with it (JSON: the keys of every entry, ``job``, ``run_id`` and ``damaged``:
    ``{"sk", "problem"}`` set, the others null)."""
    assert main(["runs", JOB, "--output", output]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "Traceback" not in captured.err and captured.err == ""
    if output == "json":
        rows = json.loads(out)
        # newest key first: "RUN#not-a-run-id" sorts after every run id
        assert [r["run_id"] for r in rows] == [
            "not-a-run-id", log["good"][0].run_id, log["good"][1].run_id, log["typed"],
            log["bare"], log["good"][2].run_id]
        damaged = _damaged(rows)
        assert damaged[run_sk(log["bare"])] == {
            **dict.fromkeys(RUN_KEYS), "job": JOB, "run_id": log["bare"],
            "damaged": {"sk": run_sk(log["bare"]), "problem": PROBLEMS["bare"]}}
        assert damaged[run_sk(log["typed"])]["damaged"]["problem"] == PROBLEMS["typed"]
        problem = damaged["RUN#not-a-run-id"]["damaged"]["problem"]
        assert problem.startswith(PROBLEMS["key"]) and problem.endswith(
            "is not the id in its key")
        return
    lines = out.rstrip("\n").split("\n")
    if output == "table":
        # the header, its rule, 6 rows, then one note per damaged row
        assert len(lines) == 2 + 6 + 3, out
        assert sum(" DAMAGED " in line for line in lines[2:8]) == 3, out
        assert lines[2].startswith("not-a-run-id ") and "DAMAGED" in lines[2], out
        assert f"damaged row RUN#{log['bare']}: {PROBLEMS['bare']}" in lines[8:]
        assert f"damaged row RUN#{log['typed']}: {PROBLEMS['typed']}" in lines[8:]
    else:
        assert len(lines) == 6, out
        assert sum('"problem":' in line for line in lines) == 3, out
    for good in log["good"]:
        assert good.run_id in out


@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_status_lists_the_last_runs_and_names_the_damaged_ones(log, capsys, output):
    """WHEN `jobguard status` shows the last five rows THEN exit 0, the lease and the
    runs are shown, the damaged rows among them named."""
    assert main(["status", JOB, "--output", output]) == 0
    out = capsys.readouterr().out
    if output == "json":
        data = json.loads(out)
        assert data["held"] is False and len(data["last_runs"]) == 5
        assert set(_damaged(data["last_runs"])) == {
            "RUN#not-a-run-id", run_sk(log["typed"]), run_sk(log["bare"])}
        return
    if output == "table":
        assert out.count(" DAMAGED ") == 3 and f"damaged row RUN#{log['typed']}: " in out
    assert f"RUN#{log['bare']}" in out and "RUN#not-a-run-id" in out
    assert log["good"][0].run_id in out and log["good"][1].run_id in out


@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_run_names_a_damaged_row_and_exits_1(log, capsys, output):
    """WHEN `jobguard run` is asked for the run whose row is damaged THEN it says so,
    naming the key and the problem, exit 1 (the run cannot be shown); a good run next
    to it is shown as ever, exit 0."""
    assert main(["run", log["bare"], "--job", JOB, "--output", output]) == 1
    out = capsys.readouterr().out
    if output == "json":
        assert json.loads(out) == {"job": JOB, "run_id": log["bare"], "damaged": {
            "sk": run_sk(log["bare"]), "problem": PROBLEMS["bare"]}}
    elif output == "table":
        assert out == (f"run {log['bare']} of job {JOB}: its row RUN#{log['bare']} is "
                       f"damaged: {PROBLEMS['bare']}\n")
    else:
        assert f"damaged\t{{\"sk\":\"RUN#{log['bare']}\"" in out
    assert main(["run", log["good"][1].run_id, "--job", JOB, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "failed"


def test_runs_with_a_status_filter_still_lists_the_damaged_rows(log, capsys):
    """A damaged row's status cannot be read: `runs --status failed` lists it beside the
    failed run rather than hide it."""
    assert main(["runs", JOB, "--status", "failed", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert ["damaged" if r["damaged"] else r["status"] for r in rows] == [
        "damaged", "failed", "damaged", "damaged"]


def test_the_readers_go_on_past_a_damaged_row(log, monkeypatch):
    """The store names the damaged rows in their place (``list_runs``, ``get_run``,
    ``runs_between``); the testing kit's ``runs()`` leaves them out and lists the rest."""
    store = log["store"]
    rows = store.list_runs(JOB, limit=10)
    assert [type(r).__name__ for r in rows] == ["DamagedRun", "RunRecord", "RunRecord",
                                                "DamagedRun", "DamagedRun", "RunRecord"]
    assert isinstance(store.get_run(JOB, log["bare"]), DamagedRun)
    assert store.get_run(JOB, log["good"][0].run_id) == log["good"][0]
    between = store.runs_between(JOB, from_ms=T0 - 1, to_ms=T0 + 90_000)
    assert [r.run_id for r in between.records] == [r.run_id for r in reversed(log["good"])]
    assert {d.sk for d in between.damaged} == {run_sk(log["bare"]), run_sk(log["typed"])}
    assert between.unreadable[0] == f"RUN#{log['bare']}: {PROBLEMS['bare']}"


def test_the_testing_kit_lists_the_runs_past_a_damaged_row(jobguard_sandbox):
    """GIVEN a wired job that ran once and a garbage row in its run log WHEN a test
    reads ``job.runs()`` THEN the run is there (the row is left out, not raised)."""
    from jobguard import guarded

    @guarded(JOB)
    def handler(event: Any, context: Any) -> str:
        return "done"

    job = jobguard_sandbox.wire(handler)
    assert job.tick() == "done"
    jobguard_sandbox.client("dynamodb").put_item(
        TableName=jobguard_sandbox.store.table_name,
        Item={"pk": {"S": job_pk(JOB)}, "sk": {"S": "RUN#zzz"}, "status": {"N": "1"}})
    assert [r.status.value for r in job.runs()] == ["succeeded"]
    assert job.decisions() == ["ran"]
    assert isinstance(jobguard_sandbox.store.list_runs(JOB)[0], DamagedRun)


@pytest.mark.parametrize(("item", "problem"), [
    ({"job": {"S": JOB}, "run_id": {"S": "R1"}}, "status is missing"),
    ({"job": {"S": "other-job"}, "run_id": {"S": "R1"}, "status": {"S": "failed"}},
     "job 'other-job' is not the job of its key ('crm-sync')"),
    ({"job": {"S": JOB}, "run_id": {"S": "R2"}, "status": {"S": "failed"}},
     "run_id 'R2' is not the id in its key"),
    ({"job": {"S": JOB}, "run_id": {"S": "R1"}, "status": {"S": "failed"},
      "started_at_ms": {"N": "-1"}}, "started_at_ms -1 is not a time in milliseconds"),
    ({"job": {"S": JOB}, "run_id": {"S": "R1"}, "status": {"S": "failed"},
      "holder_fence": {"BOOL": False}}, "holder_fence is a boolean, not a whole number"),
    ({"job": {"N": "7"}, "run_id": {"S": "R1"}, "status": {"NULL": True}},
     "job is a number, not text; status None is not a run status jobguard writes"),
    ({"job": {"S": JOB}, "run_id": {"S": "R1"}, "status": {"M": {"a": {"S": "b"}}}},
     "status {'a': 'b'} is not a run status jobguard writes"),
])
def test_each_wrong_attribute_is_named(item, problem):
    read = read_run_row({"pk": {"S": job_pk(JOB)}, "sk": {"S": "RUN#R1"}, **item})
    assert isinstance(read, DamagedRun) and read.problem == problem, read


def test_a_good_row_keeps_its_own_attributes():
    read = read_run_row({
        "pk": {"S": job_pk(JOB)}, "sk": {"S": "RUN#R1"}, "job": {"S": JOB},
        "run_id": {"S": "R1"}, "status": {"S": "incomplete"}, "fence": {"N": "3"},
        "started_at_ms": {"N": str(T0)}, "ended_at_ms": {"N": str(T0 + 5)},
        "items": {"M": {"completed": {"N": "2"}}}, "ttl_epoch_s": {"N": "9"}})
    assert isinstance(read, RunRecord) and read.status is RunStatus.INCOMPLETE
    assert read.extra == {"items": {"completed": 2}} and read.duration_ms == 5


@pytest.mark.parametrize("output", ["table", "text", "json"])
def test_a_time_past_the_year_9999_crashes_no_reader(env, capsys, output):
    """GIVEN a run row whose started_at_ms is the last millisecond a run id can hold
    (2**48 - 1: the year 10889) and a good row whose extra attribute ``taken_at_ms`` is
    as far WHEN `runs`, `status` and `run` show them THEN no traceback: the first is
    named damaged (no date shows it), the second is listed with that attribute kept as
    the number it is, exit 0 (1 for `run` of the damaged one)."""
    ddb, store = env
    far, late = new_run_id(T0), new_run_id(T0 + 1_000)
    for run_id, attributes in ((far, {"started_at_ms": {"N": str((1 << 48) - 1)}}),
                               (late, {"taken_at_ms": {"N": str(10 ** 17)}})):
        ddb.put_item(TableName=store.table_name, Item={
            "pk": {"S": job_pk(JOB)}, "sk": {"S": run_sk(run_id)}, "job": {"S": JOB},
            "run_id": {"S": run_id}, "status": {"S": "succeeded"}, **attributes})
    for argv, code in ((["runs", JOB], 0), (["status", JOB], 0),
                       (["run", far, "--job", JOB], 1), (["run", late, "--job", JOB], 0)):
        capsys.readouterr()
        assert main([*argv, "--output", output]) == code, argv
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and captured.err == "", captured.err
        assert "started_at_ms 281474976710655 is not a time in milliseconds" in \
            captured.out or argv[1] == late, (argv, captured.out)
    rows = json.loads(_cli_json(capsys, "runs", JOB))
    assert {r["run_id"]: (r["extra"] or {}).get("taken_at_ms") for r in rows}[late] == 10 ** 17


def _cli_json(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("attributes", [
    {"state": {"S": "bogus"}}, {"state": {"S": "failed"}, "attempts": {"S": "many"}},
    {"state": {"S": "failed"}, "attempts": {"M": {}}}], ids=["state", "attempts", "map"])
def test_items_names_a_damaged_item_row_and_lists_the_rest(env, capsys, attributes):
    """GIVEN a failed item of crm-sync and, beside it in the unresolved index, a row that
    is not a readable item (anyone who may write the table can leave one) WHEN `jobguard
    items` lists them THEN exit 0, the good item listed, the damaged one named."""
    from jobguard.schema import ITEM_SK, item_pk

    ddb, store = env
    store.pause(JOB, reason="x", now_ms=T0)  # the job is known to the table
    for work_id, extra in (("good", {"state": {"S": "failed"}}), ("bad", attributes)):
        ddb.put_item(TableName=store.table_name, Item={
            "pk": {"S": item_pk(JOB, work_id)}, "sk": {"S": ITEM_SK},
            "work_id": {"S": work_id}, "unresolved_pk": {"S": f"UNRESOLVED#{JOB}#00"},
            "unresolved_sk": {"S": f"failed#{work_id}"}, **extra})
    capsys.readouterr()
    assert main(["items", JOB, "--json"]) == 0, capsys.readouterr().err[-1500:]
    rows = json.loads(capsys.readouterr().out)
    assert [r["work_id"] for r in rows] == ["good", "bad"] and "damaged" in rows[1]
    assert rows[0]["state"] == "failed" and rows[0]["damaged"] is None
    assert rows[1]["state"] is None and rows[1]["damaged"]["pk"] == item_pk(JOB, "bad")
    problem = rows[1]["damaged"]["problem"]
    assert ("state" if "bogus" in str(attributes) else "attempts") in problem
    for output in ("table", "text"):
        assert main(["items", JOB, "--output", output]) == 0
        captured = capsys.readouterr()
        assert captured.err == "" and "good" in captured.out, captured
        assert problem in captured.out  # the damaged row named, with what is wrong
    assert "DAMAGED" in main_table(capsys)


def main_table(capsys) -> str:
    assert main(["items", JOB]) == 0
    return capsys.readouterr().out


def test_runs_lists_the_run_log_when_the_lease_row_is_damaged(log, capsys):
    """GIVEN crm-sync's run log and a lease row anyone who may write the table damaged
    (its run_id a number) WHEN `jobguard runs` lists the log THEN exit 0 and every row
    is listed: the lease row is not the run log (`status` names its damage)."""
    store = log["store"]
    store.client.put_item(TableName=store.table_name, Item={
        "pk": {"S": job_pk(JOB)}, "sk": {"S": "LEASE"}, "fence": {"N": "3"},
        "run_id": {"N": "5"}})
    assert main(["runs", JOB, "--json"]) == 0, capsys.readouterr().err
    rows = json.loads(capsys.readouterr().out)
    assert {r["run_id"] for r in rows} >= {r.run_id for r in log["good"]}


@pytest.mark.parametrize(("attributes", "problem"), [
    ({}, "state None is not an item state jobguard writes"),
    ({"state": {"M": {"a": {"S": "b"}}}},
     "state {'a': 'b'} is not an item state jobguard writes"),
    ({"state": {"S": "failed"}, "attempts": {"S": "many"}}, "attempts is text, not a whole number"),
    ({"state": {"S": "failed"}, "retryable": {"S": "yes"}}, "retryable is text, not a boolean"),
    ({"state": {"S": "completed"}, "destination_id": {"N": "5"}, "fence": {"N": "1.5"}},
     "destination_id is a number, not text; fence is a fraction, not a whole number"),
    ({"state": {"S": "failed"}, "work_id": {"S": "other:op"}},
     "work_id 'other:op' is not the work id in its key"),
])
def test_each_wrong_item_attribute_is_named(attributes, problem):
    """GIVEN an item row anyone could write WHEN it is read THEN a DamagedItem, read as
    uncertain (never done, never absent), naming its key and each problem."""
    from jobguard._item_rows import read_item_row
    from jobguard.schema import item_pk
    from jobguard.workitems import DamagedItem, ItemState

    read = read_item_row(JOB, {"pk": {"S": item_pk(JOB, "c-1:note")}, "sk": {"S": "ITEM"},
                               "x": {"S": "y"}, **attributes})
    assert isinstance(read, DamagedItem) and read.problem == problem, read
    assert read.work_id == "c-1:note" and read.state is ItemState.UNCERTAIN
    assert str(read) == f"{item_pk(JOB, 'c-1:note')}: {problem}"


def test_a_good_item_row_reads_as_its_item():
    from jobguard._item_rows import read_item_row
    from jobguard.schema import item_pk
    from jobguard.workitems import DamagedItem, ItemState

    read = read_item_row(JOB, {"pk": {"S": item_pk(JOB, "c-1:note")}, "sk": {"S": "ITEM"},
                               "state": {"S": "failed"}, "attempts": {"N": "2"},
                               "retryable": {"BOOL": True}, "last_error": {"S": "boom"}})
    assert read is not None and not isinstance(read, DamagedItem)
    assert (read.work_id, read.state, read.attempts, read.retryable, read.last_error) == (
        "c-1:note", ItemState.FAILED, 2, True, "boom")


def test_a_run_log_past_its_bound_is_cut_to_the_oldest_and_says_so(log):
    """``runs_between(max_records=N)``: at most N records, the oldest first (what the
    timeline draws from the range's start), and ``truncated`` set so the reader says the
    rest is not drawn."""
    store = log["store"]
    whole = store.runs_between(JOB, from_ms=T0 - 1, to_ms=T0 + 90_000)
    assert len(whole.records) == 3 and not whole.truncated
    cut = store.runs_between(JOB, from_ms=T0 - 1, to_ms=T0 + 90_000, max_records=2)
    assert [r.run_id for r in cut.records] == [r.run_id for r in whole.records[:2]]
    assert cut.truncated
