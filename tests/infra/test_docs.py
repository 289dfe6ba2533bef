"""docs/deploying.md lists every alarm the stack makes, with the metric it watches and
its runbook entry, and nothing else: the list is compared with the synthesized alarms,
so it cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from jobguard.runbook import job_alarms, reconciler_alarms, recovery_alarms, table_alarms

from .conftest import Synth

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploying.md"


def _rows() -> dict[tuple[str, str], tuple[set[str], str]]:
    """(on, alarm) -> (the metric names in its row, its runbook entry's title)."""
    text = DOC.read_text()
    table = text.split("<!-- alarms: begin -->", 1)[1].split("<!-- alarms: end -->", 1)[0]
    rows: dict[tuple[str, str], tuple[set[str], str]] = {}
    for line in table.strip().splitlines()[2:]:
        on, alarm, metric, _fires, entry = (c.strip() for c in line.strip("|").split("|"))
        key = (on, alarm.strip("`"))
        assert key not in rows, f"{key} listed twice"
        rows[key] = (set(re.findall(r"`(\w+)`", metric)), entry)
    return rows


def test_the_deploying_doc_lists_exactly_the_synthesized_alarms(synth: Synth) -> None:
    rows = _rows()
    synthesized = {}
    for name, alarm in synth.stack.alarms.items():
        owner, kind = name.split("/")
        synthesized.setdefault((owner.split(":")[0], kind), []).append(alarm)
    # the session's app has a job of every policy and schedule kind, a reconciler (which
    # uses its job's DLQ), recovery and the table: every kind the doc lists
    assert set(rows) == set(synthesized)
    for key, alarms in synthesized.items():
        metrics, _ = rows[key]
        for alarm in alarms:
            assert synth.properties(alarm)["MetricName"] in metrics, (key, metrics)


def test_each_listed_alarm_names_its_runbook_entry(synth: Synth) -> None:
    titles: dict[tuple[str, str], set[str]] = {}
    for guarded in synth.stack.jobs.values():
        for kind, text in job_alarms(guarded.job).items():
            titles.setdefault(("job", kind), set()).add(text.title)
    for reconciler in synth.stack.reconcilers:
        for kind, text in reconciler_alarms(reconciler.job, own_dead_letter_queue=True).items():
            titles.setdefault(("reconciler", kind), set()).add(text.title)
    for owner, texts in (("recovery", recovery_alarms()), ("table", table_alarms())):
        for kind, text in texts.items():
            titles.setdefault((owner, kind), set()).add(text.title)
    for key, (_, entry) in _rows().items():
        if key == ("job", "busy"):  # its title names the policy's decision: all three
            assert all(title.split(" ")[1] in entry for title in titles[key]), entry
        else:
            assert {entry} == titles[key], key
