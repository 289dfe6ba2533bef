"""Issue 34, finding 1: text that came from a record, an event or a remote system never
drives the operator's terminal. Escape sequences (clear the screen, set the window
title, recolour), a newline that forges a line, a carriage return, an 8-bit CSI, a bidi
override: each is shown as its escape, one record stays one line (one tab-separated row
in ``--output text``), and ``--output json`` stays exact. In process, on the in-process
emulator; the hostile text arrives the ways it does in production: a manual invoke's
``requested_by``, the handler's exception, a work item's source id, a row written by
anyone who may write the table, the recovery function's answer.
"""

from __future__ import annotations

import io
import json
import os
import threading
import zipfile
from typing import Any

import pytest

from jobguard import OverlapPolicy, WorkId, current_run, guarded
from jobguard._safe_text import safe_lines, safe_text
from jobguard.cli import build_parser, main
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind

FORGED = "\n01M8K455D5SMBCC61XNCBKW1C4  2026-11-29T07:35:00Z  succeeded"
"""A newline, then a line that reads as a run that succeeded."""
ATTACK = ("boom\x1b[2J\x1b]0;title\x07" + FORGED + "\r\x08\x7f\x9b31m red \u202eevil"
          "\u2066iso\u2069\u200f\u200e\u061c\ttab")
"""Every character class the terminal must never receive raw: ESC sequences (clear
screen, window title ending in BEL), a forged line, CR, backspace, DEL, the 8-bit CSI,
bidi override / isolate / marks, and a TAB inside a value."""
SOURCE = "b\x1b[2J" + FORGED + "\x9b31m\u202eevil"
"""A work item's source record id: its key escapes the C0 controls, and keeps the C1 CSI
and the bidi override; the ledger keeps the id itself."""
SHOWN = ("\\x1b[2J", "\\x1b]0;title\\x07", "\\n01M8K455D5SMBCC61XNCBKW1C4", "\\r", "\\x08",
         "\\x7f", "\\x9b31m", "\\u202e", "\\u2066", "\\u200f", "\\u061c", "\\ttab")
"""How the attack reads on the terminal: visibly, character by character."""
FORMATS = ("table", "text", "json")


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on or show other than as written:
    anything Python would not print as itself, but the line breaks and tabs the CLI
    writes on purpose."""
    return sorted({f"U+{ord(c):04X}" for c in text if not (c.isprintable() or c in "\n\t")})


@pytest.fixture
def hostile(jobguard_sandbox, monkeypatch) -> dict[str, Any]:
    """GIVEN crm-sync's run log and ledger holding the attack everywhere a stranger can
    put text: a run invoked by hand whose requested_by is the attack, whose handler
    failed with it and whose failed item's source id carries it; a run record written
    into the table by anyone who may write it (trigger, owner, holder, requested_by,
    error); a pause reason; and a lease held by a run whose id and owner carry it."""
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)

    @guarded("crm-sync", policy=OverlapPolicy.SKIP)
    def handler(event: Any, context: Any) -> Any:
        run = current_run()
        for item in run.claim(["a", SOURCE], work_id=lambda r: WorkId(r, "note")):
            with item:
                if item.record == SOURCE:
                    raise RuntimeError(ATTACK)
                item.complete(destination_id="note-a")
        raise RuntimeError(ATTACK)

    job = jobguard_sandbox.wire(handler)
    with pytest.raises(RuntimeError):
        job({"job": "crm-sync", "manual": True, "requested_by": ATTACK})
    store = jobguard_sandbox.store
    now_ms = int(jobguard_sandbox.clock.now().timestamp() * 1000)
    (invoked,) = job.runs()
    written = RunRecord(job="crm-sync", run_id="01M8K455D5SMBCC61XNCBKW1C5",
                        trigger_id=ATTACK, trigger_kind="manual", policy="SKIP",
                        decision=Decision.RAN, status=RunStatus.FAILED,
                        started_at_ms=now_ms + 1_000, ended_at_ms=now_ms + 2_000, fence=9,
                        owner=ATTACK, holder_run_id=ATTACK, requested_by=ATTACK,
                        error=ATTACK, detail=ATTACK)
    store.put_run(written, ttl_epoch_s=now_ms // 1000 + 86_400)
    store.pause("crm-sync", reason=ATTACK, now_ms=now_ms)
    held = store.take(Take(Trigger("crm-sync", "crm-sync@manual:held", TriggerKind.MANUAL),
                           run_id="R\x1b[2J\u202e", owner=ATTACK, now_ms=now_ms + 3_000,
                           lease_ms=3_600_000))
    assert held.__class__.__name__ == "Acquired"
    return {"job": job, "invoked": invoked, "written": written,
            "work_id": str(WorkId(SOURCE, "note"))}


def _cli(capsys, *argv: str, code: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    assert main(list(argv)) == code, capsys.readouterr()
    captured = capsys.readouterr()
    return captured.out, captured.err


def _safe(out: str, err: str) -> None:
    assert not _unsafe(out), (_unsafe(out), out[:3000])
    assert not _unsafe(err), (_unsafe(err), err[:3000])
    assert "Traceback" not in err, err


@pytest.mark.parametrize("output", FORMATS)
def test_runs_shows_hostile_run_text_escaped_one_row_per_run(hostile, capsys, output):
    """WHEN `jobguard runs` lists the runs in each format THEN no control or bidi
    character reaches the terminal, each run is one line (plus the table's two header
    lines), and JSON gives back exactly what the records hold."""
    out, err = _cli(capsys, "runs", "crm-sync", "--output", output)
    _safe(out, err)
    rows = json.loads(_cli(capsys, "runs", "crm-sync", "--json")[0])
    assert len(rows) == 3  # the held run, the written record, the invoked run
    if output == "json":
        by_id = {r["run_id"]: r for r in json.loads(out)}
        written = by_id["01M8K455D5SMBCC61XNCBKW1C5"]
        for field in ("trigger_id", "owner", "holder_run_id", "requested_by", "error",
                      "detail"):
            assert written[field] == ATTACK, field
        assert by_id[hostile["invoked"].run_id]["requested_by"] == ATTACK
        assert ATTACK in by_id[hostile["invoked"].run_id]["error"]
        assert by_id["R\x1b[2J\u202e"]["owner"] == ATTACK
        return
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == len(rows) + (2 if output == "table" else 0), out
    assert "\\x1b[2J" in out and "\\u202e" in out and "\\x9b31m" in out
    if output == "text":
        columns = {len(line.split("\t")) for line in lines}
        assert columns == {len({k for r in rows for k in r})}, out  # a TAB adds no column
        assert all(s in out for s in SHOWN), out


@pytest.mark.parametrize("output", FORMATS)
def test_run_shows_a_hostile_record_field_by_field_one_line_each(hostile, capsys, output):
    """WHEN `jobguard run` shows the record written with the attack in every text field
    THEN one line per field, nothing raw, and JSON exact."""
    out, err = _cli(capsys, "run", "01M8K455D5SMBCC61XNCBKW1C5", "--job", "crm-sync",
                    "--output", output)
    _safe(out, err)
    data = json.loads(_cli(capsys, "run", "01M8K455D5SMBCC61XNCBKW1C5", "--job",
                           "crm-sync", "--json")[0])
    if output == "json":
        assert json.loads(out) == data and data["requested_by"] == ATTACK
        assert data["error"] == ATTACK and data["trigger_id"] == ATTACK
        return
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == len(data), out
    assert all(s in out for s in SHOWN), out
    if output == "text":
        assert all(len(line.split("\t")) == 2 for line in lines), out


@pytest.mark.parametrize("output", FORMATS)
def test_items_shows_a_hostile_work_id_and_error_escaped(hostile, capsys, output):
    """GIVEN the failed item whose source id holds ESC, a forged line, an 8-bit CSI and a
    bidi override (its work id keeps the last two) and whose last error is the attack
    WHEN `jobguard items` lists it THEN one line, nothing raw, JSON exact."""
    out, err = _cli(capsys, "items", "crm-sync", "--output", output)
    _safe(out, err)
    (item,) = json.loads(_cli(capsys, "items", "crm-sync", "--json")[0])
    assert "\x9b" in item["work_id"] and "\u202e" in item["work_id"]
    if output == "json":
        (shown,) = json.loads(out)
        assert shown == item and shown["work_id"] == hostile["work_id"]
        assert shown["source_id"] == SOURCE and ATTACK in shown["last_error"]
        return
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == 1 + (2 if output == "table" else 0), out
    assert "\\x9b31m" in out and "\\u202eevil" in out and "\\x1b[2J" in out


@pytest.mark.parametrize("output", FORMATS)
def test_status_shows_hostile_holder_pause_reason_and_runs_escaped(hostile, capsys,
                                                                    output):
    """WHEN `jobguard status` shows the lease (its holder's id and owner carry the
    attack), the pause reason (the attack) and the last runs THEN nothing raw, the
    human view keeps its shape (2 lines, a blank, the table of 3 runs), text is one
    line per key, and JSON is exact."""
    out, err = _cli(capsys, "status", "crm-sync", "--output", output)
    _safe(out, err)
    data = json.loads(_cli(capsys, "status", "crm-sync", "--json")[0])
    if output == "json":
        data = json.loads(out)
        assert data["paused"] == ATTACK and data["owner"] == ATTACK
        assert data["holder_run_id"] == "R\x1b[2J\u202e"
        return
    lines = out.rstrip("\n").split("\n")
    if output == "table":
        assert len(lines) == 3 + 2 + len(data["last_runs"]), out
        assert lines[0].startswith("job crm-sync: held by run R\\x1b[2J\\u202e"), lines[0]
        assert lines[1].startswith("pending: ") and "paused: boom\\x1b[2J" in lines[1]
    else:
        assert len(lines) == len(data), out
        assert all(len(line.split("\t")) == 2 for line in lines), out
    assert all(s in out for s in SHOWN), out


def _recovery_function(emu: Any, monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]
                       ) -> None:
    """A deployed recovery function whose answer is ``answer`` (the emulator's Lambda
    runs no code: its invocation is answered at moto's boundary)."""
    from moto.awslambda.models import LambdaFunction

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda",
                        lambda _fn, event=None: (json.dumps(answer), False, ""))
    role = emu.client("iam").create_role(RoleName="recovery",
                                         AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("recovery.py", "def lambda_handler(event, context): pass\n")
    emu.client("lambda").create_function(
        FunctionName="recovery", Runtime="python3.12", Role=role,
        Handler="recovery.lambda_handler", Code={"ZipFile": code.getvalue()})


def test_every_command_is_safe_with_hostile_data(hostile, jobguard_sandbox, capsys,
                                                 monkeypatch):
    """WHEN every command of the CLI runs against the hostile table, in every output
    format (the recovery function answering with the attack and a lone surrogate, a
    refusal quoting it, errors quoting a job name the table holds) THEN nothing raw
    reaches stdout or stderr, and an error is one line. A command added later without
    a line here fails this test."""
    work_id = hostile["work_id"]
    plan = {"result": "planned", "job": "crm-sync", "mode": ATTACK,
            "range": {"cursor_from": ATTACK, "cursor_to": "\ud800"},
            "plan": {"selected": 3, "to_replay": 1, "conflicts": 1,
                     "conflict_ids": [work_id], "rejected": 1,
                     "rejected_sample": [ATTACK], "sample": [work_id, "\ud800"],
                     "token": ATTACK}, "needs_confirmation": True}
    _recovery_function(jobguard_sandbox, monkeypatch, plan)
    # a job row whose name no operator typed: the table's job names are quoted in errors
    jobguard_sandbox.client("dynamodb").put_item(
        TableName=jobguard_sandbox.store.table_name,
        Item={"pk": {"S": "JOB#crm-sync" + FORGED + "\x1b[2J"}, "sk": {"S": "LEASE"},
              "fence": {"N": "1"}})
    commands: dict[str, list[tuple[list[str], int]]] = {
        "status": [(["status", "crm-sync"], 0), (["status", "crm-synk"], 2)],
        "runs": [(["runs", "crm-sync"], 0)],
        "run": [(["run", "01M8K455D5SMBCC61XNCBKW1C5", "--job", "crm-sync"], 0)],
        "items": [(["items", "crm-sync"], 0)],
        "pause": [(["pause", "crm-sync", "--reason", ATTACK], 0)],
        "resume": [(["resume", "crm-sync"], 0)],
        "release": [(["release", "crm-sync", "--force", "--yes", "--reason", ATTACK], 0)],
        "repair": [(["repair", "crm-sync", "--yes"], 0)],
        "runbook": [(["runbook", "crm-sync", "--jobs-module", "handlers.jobs"], 0)],
        "recover": [(["recover", "crm-sync", "--from", "0", "--to", "5",
                      "--function-name", "recovery"], 0)],
        "timeline": [(["timeline", "crm-sync", "--since", "24h", "--width", "100"], 0)],
        "resolve": [(["resolve", "crm-sync", work_id, "--not-found", "--reason", ATTACK,
                      "--requested-by", ATTACK, "--wait", "0"], 0)],
        # `local` runs its own generated load (no record text of anyone's); `drill`
        # needs a deployed stack: here its one-line refusal, quoting the stack name
        "local": [],
        "drill": [(["drill", "--stack", "JobGuard-drills", "--jobs-module", "handlers.jobs"], 2)],
    }
    assert set(commands) == set(_commands()), "every command is walked here"
    for output in FORMATS:
        for runs in commands.values():
            for argv, code in runs:
                monkeypatch.setattr("sys.stdin", io.StringIO(""))
                capsys.readouterr()
                got = main([*argv, "--output", output])
                captured = capsys.readouterr()
                assert got == code, (argv, output, captured.err[-2000:])
                _safe(captured.out, captured.err)
                if code:
                    assert len(captured.err.strip().split("\n")) == 1, captured.err
                if output == "json" and not code:
                    json.loads(captured.out)  # exact, parseable JSON
    # the recovery's answer as the operator reads it: every quoted value visible
    out, err = _cli(capsys, "recover", "crm-sync", "--from", "0", "--to", "5",
                    "--function-name", "recovery")
    _safe(out, err)
    assert "\\ud800" in out and "\\x9b31m" in out and "\\x1b[2J" in out
    assert len(out.rstrip("\n").split("\n")) == 6, out  # its own lines, none forged


def _commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return list(sub.choices)


def test_a_refusal_from_the_recovery_function_is_one_safe_error_line(hostile,
                                                                     jobguard_sandbox,
                                                                     capsys, monkeypatch):
    """GIVEN the recovery function refusing with an error that quotes the attack WHEN
    `recover` prints it THEN one `error:` line, the attack escaped."""
    _recovery_function(jobguard_sandbox, monkeypatch,
                       {"result": "refused", "field": "cursor_from", "error": ATTACK})
    out, err = _cli(capsys, "recover", "crm-sync", "--from", "0", "--to", "5",
                    "--function-name", "recovery", code=2)
    _safe(out, err)
    (line,) = err.strip().split("\n")
    assert line.startswith("error: --from: boom\\x1b[2J\\x1b]0;title\\x07\\n01M8"), line


def test_json_escapes_every_control_bidi_and_surrogate_and_round_trips():
    """JSON as the CLI writes it (ensure_ascii) holds no character a terminal acts on,
    and gives back exactly the text."""
    text = ATTACK + "\ud800\U000e0001\u2028"
    written = json.dumps({"error": text}, indent=2, ensure_ascii=True)
    assert not _unsafe(written) and written.isascii()
    assert json.loads(written) == {"error": text}


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J", "\\x1b[2J"), ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
    ("a\nb\rc\td", "a\\nb\\rc\\td"), ("\x08\x7f", "\\x08\\x7f"),
    ("\x9b31m\x85", "\\x9b31m\\x85"), ("\u202a\u202e\u2066\u2069", "\\u202a\\u202e\\u2066\\u2069"),
    ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"), ("\ud800", "\\ud800"),
    ("\u2028\u2029", "\\u2028\\u2029"), ("C:\\temp é 東京 ✓", "C:\\temp é 東京 ✓"),
])
def test_safe_text_shows_each_dangerous_character_as_its_escape(raw, shown):
    assert safe_text(raw) == shown
    if "\n" not in raw and "\t" not in raw:  # safe_lines keeps those: the CLI's own
        assert safe_lines(f"x\t{raw}\ny") == f"x\t{shown}\ny"


def test_text_written_by_a_thread_during_a_command_is_escaped_too(capsys):
    """The escaping is the streams', for the command's whole run: a line a library
    prints from another thread while a command runs is made safe as well."""
    from jobguard._safe_text import safe_streams

    with safe_streams():
        worker = threading.Thread(target=lambda: print("log \x1b[2J\u202e"))
        worker.start()
        worker.join()
    assert capsys.readouterr().out == "log \\x1b[2J\\u202e\n"


HOSTILE_FEED = '''
from jobguard import BatchJob, JobConfig, WorkId, registry


class Feed(BatchJob):
    """A job whose source answers with an error body a stranger wrote."""

    def select(self, cursor, limit):
        raise RuntimeError(ATTACK)  # e.g. requests.HTTPError quoting the remote body

    def work_id(self, record):
        return WorkId(record, "note")

    def process(self, record, item):
        return "note-1"

    def reconcile(self, record, item):
        return None


registry.register(Feed(JobConfig(name="hostile-feed")))
'''


def test_a_command_that_crashes_shows_its_traceback_escaped(jobguard_sandbox, capsys,
                                                           monkeypatch, tmp_path):
    """GIVEN a job whose source raises an exception quoting what a remote API answered
    (the attack) WHEN `recover --direct` plans it and the command crashes on that
    exception THEN the crash is said on stderr with every character escaped, exit 1:
    the traceback does not wait for the stream's escaping to end (Python printed an
    exception that leaves ``main`` after its ``with safe_streams()`` has restored the
    raw stream, so the attack reached the terminal as it was)."""
    module = f"hostile_feed_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(f"ATTACK = {ATTACK!r}\n{HOSTILE_FEED}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("JOBGUARD_RECOVERY_MODULES", module)
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)
    for name in ("AWS_ENDPOINT_URL", "JOBGUARD_TABLE"):  # --direct sets them: restored
        monkeypatch.setenv(name, os.environ.get(name, ""))
    capsys.readouterr()
    code = main(["recover", "hostile-feed", "--from", "0", "--to", "5", "--direct"])
    out, err = capsys.readouterr()
    assert code == 1
    _safe(out, err.replace("Traceback (most recent call last)", ""))
    assert "RuntimeError: boom\\x1b[2J\\x1b]0;title\\x07\\n01M8" in err, err[-2000:]
    assert all(s in err for s in SHOWN), err[-2000:]  # the message is one line
