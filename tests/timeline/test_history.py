"""The timeline of a real history: guarded runs on the in-process emulator, read back
through the store's run-record query by ``jobguard timeline`` (``main(argv)``).

GIVEN a SKIP job whose run 1 is held open while a second tick arrives (skipped) and a
redelivery of run 1's tick arrives (duplicate); a worker that took the lease and
vanished (taken over after expiry: abandoned, a takeover); a stuck run an operator
force-releases; WHEN the timeline is asked for THEN every run is a bar with its status,
fence and times, every decision a mark linked to its holder, the takeover and the force
release markers, as JSON, as text and as a page.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from jobguard.cli import main
from jobguard.ids import new_run_id
from jobguard.requests import Take
from jobguard.timeline._format import iso
from jobguard.triggers import Trigger, TriggerKind

from ..scenarios._support import Gate, Recorder, holding, in_thread, make_job, tick


@pytest.fixture
def history(aws, clock, monkeypatch):
    monkeypatch.setenv("JOBGUARD_TABLE", aws.table)
    monkeypatch.setenv("USER", "alice")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    t0 = clock.now()
    gate, rec = Gate(), Recorder()
    first = tick("crm-sync", t0)
    job = make_job(aws, clock, rec.handler(holding(gate, first)), lease=timedelta(seconds=30))
    thread, _ = in_thread(lambda: job(first, None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=10))
    skipped = job(tick("crm-sync", clock.now()), None)
    duplicate = job(first, None)
    clock.advance(timedelta(seconds=10))
    gate.release.set()
    thread.join(10)
    # a worker takes the lease at t0+60 s and vanishes; the next tick takes it over
    clock.advance(timedelta(seconds=40))
    now_ms = int(clock.now().timestamp() * 1000)
    vanished = new_run_id(now_ms)  # as a worker names its run
    aws.store.take(Take(Trigger("crm-sync", "crm-sync@manual:vanished", TriggerKind.MANUAL),
                        run_id=vanished, owner="worker-b", now_ms=now_ms, lease_ms=30_000))
    clock.advance(timedelta(seconds=40))
    job(tick("crm-sync", clock.now()), None)
    return {"t0": t0, "job": job, "skipped": skipped, "duplicate": duplicate,
            "vanished": vanished, "clock": clock}


def _timeline(argv: list[str], capsys) -> dict:
    assert main(["--json", "timeline", *argv]) == 0
    return json.loads(capsys.readouterr().out)["jobs"][0]


def test_runs_decisions_and_a_takeover_are_where_the_run_log_says(aws, history, capsys):
    t0 = history["t0"]
    lane = _timeline(["crm-sync", "--from", iso(int(t0.timestamp() * 1000) - 5_000),
                      "--to", iso(int(t0.timestamp() * 1000) + 200_000)], capsys)
    log = {r.run_id: r for r in aws.runs("crm-sync")}
    runs = {r["run_id"]: r for r in lane["runs"]}
    # every record of the log is on the timeline, as a bar or as a mark, once
    assert set(runs) | {m["run_id"] for m in lane["decisions"]} == set(log)
    first = next(r for r in lane["runs"] if r["fence"] == 1)
    assert first["status"] == "succeeded" and first["start_ms"] == int(t0.timestamp() * 1000)
    assert first["end_ms"] - first["start_ms"] == 20_000
    decisions = {m["decision"]: m for m in lane["decisions"]}
    assert set(decisions) == {"skipped", "duplicate"}
    assert decisions["skipped"]["holder_run_id"] == first["run_id"]
    assert decisions["skipped"]["at_ms"] == first["start_ms"] + 10_000
    assert decisions["duplicate"]["became_run_id"] == first["run_id"]
    abandoned = runs[history["vanished"]]
    assert abandoned["status"] == "abandoned" and abandoned["fence"] == 2
    taker = next(r for r in lane["runs"] if r.get("displaced_run_id"))
    assert taker["displaced_run_id"] == history["vanished"] and taker["fence"] == 3
    (marker,) = lane["markers"]
    assert marker == {"kind": "takeover", "at_ms": taker["start_ms"],
                      "run_id": history["vanished"], "by": taker["run_id"], "fence": 3}


def test_the_same_history_as_text_and_as_a_page(aws, history, capsys, tmp_path: Path):
    t0 = int(history["t0"].timestamp() * 1000)
    argv = ["crm-sync", "--from", iso(t0 - 5_000), "--to", iso(t0 + 200_000)]
    assert main(["timeline", *argv, "--width", "100"]) == 0
    text = capsys.readouterr().out
    assert "crm-sync: 3 runs (2 succeeded, 1 abandoned); 2 not run (1 skipped, " \
           "1 duplicate); 1 takeover" in text
    assert "|" in text and "T" in text.split("lease ", 1)[1].split("\n")[0]
    page = tmp_path / "timeline.html"
    assert main(["timeline", *argv, "--html", str(page)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {page}: crm-sync, 3 runs, 2 triggers not run")
    html = page.read_text()
    assert html.count('data-kind="run"') == 3 and html.count('data-kind="decision"') == 2
    assert html.count('data-marker="takeover"') == 1
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in html


def test_a_force_release_is_a_marker_naming_who(aws, history, capsys):
    import time

    now_ms = int(time.time() * 1000)
    stuck = new_run_id(now_ms - 5_000)
    aws.store.take(Take(Trigger("crm-sync", "crm-sync@manual:stuck", TriggerKind.MANUAL),
                        run_id=stuck, owner="worker-c", now_ms=now_ms - 5_000, lease_ms=600_000))
    assert main(["release", "crm-sync", "--force", "--yes", "--reason", "hung"]) == 0
    capsys.readouterr()
    lane = _timeline(["crm-sync", "--since", "10m"], capsys)
    released = next(r for r in lane["runs"] if r["run_id"] == stuck)
    assert released["status"] == "released_by_operator"
    marker = next(m for m in lane["markers"] if m["kind"] == "force_release")
    assert marker["run_id"] == stuck and "alice" in marker["by"] and "hung" in marker["by"]


def test_a_run_still_holding_the_lease_is_an_open_bar(aws, history, capsys):
    import time

    now_ms = int(time.time() * 1000)
    holder = new_run_id(now_ms - 60_000)
    aws.store.take(Take(Trigger("crm-sync", "crm-sync@manual:now", TriggerKind.MANUAL),
                        run_id=holder, owner="worker-d", now_ms=now_ms - 60_000, lease_ms=600_000))
    lane = _timeline(["crm-sync", "--since", "5m"], capsys)
    bar = next(r for r in lane["runs"] if r["run_id"] == holder)
    assert bar["status"] == "running" and bar["open_end"] is True
    assert bar["start_ms"] == now_ms - 60_000 and bar["end_ms"] >= now_ms
