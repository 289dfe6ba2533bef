"""A decision is wired everywhere it must be: the table, the store, the record, the metric,
the protocol page.

Adding a protocol case touches several maps kept apart by layer (the pure table, the
store's write, the guard's record and metric, the hand-written page). A map that misses
the new case fails only at run time (a ``KeyError`` in a delivery) or not at all (a page
that never mentions it). GIVEN the maps WHEN one of them lacks a case THEN this names it
(docs/contributing.md, "Adding a protocol case", lists the places).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobguard._guard_decisions import _DECISION_OF, _METRIC_OF
from jobguard._store_triggers import DECISION_TARGET
from jobguard.observability import METRICS
from jobguard.trigger_state import TERMINAL, TRANSITIONS, Event, Next, State

pytestmark = pytest.mark.fast

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "protocol.md"
NOT_RECORDED = {Next.RUN, Next.DEFER}
"""The steps that are not a decision written as such: a run, or a wait on the queue."""


def _event_of(step: Next) -> Event:
    return Event.PAUSE if step is Next.PAUSED else Event(step.value)


def test_every_decision_has_a_record_and_a_metric():
    assert set(Next) - NOT_RECORDED == set(_DECISION_OF), "a decision the guard cannot record"
    for step, decision in _DECISION_OF.items():
        assert decision in _METRIC_OF, f"{step}: no metric for {decision}"
        assert _METRIC_OF[decision] in METRICS, f"{_METRIC_OF[decision]} is not in METRICS"


def test_every_decision_the_store_writes_is_an_edge_of_the_table():
    # DUPLICATE writes a record only, never the trigger's item
    assert set(DECISION_TARGET) == set(_DECISION_OF) - {Next.DUPLICATE}
    for step, target in DECISION_TARGET.items():
        targets = {t.target for t in TRANSITIONS if t.event is _event_of(step)}
        assert target in targets, f"{step} writes {target}, which no {_event_of(step)} edge reaches"


def test_the_protocol_page_table_names_every_event_and_state():
    page = PAGE.read_text()
    table = [line for line in page.split("## A trigger's states", 1)[1].splitlines()
             if line.startswith("| ") and not line.startswith("| from")]
    events = " ".join(line.split("|")[2] for line in table)
    targets = " ".join(line.split("|")[3] for line in table)
    for event in Event:
        word = event.value.split("_")[0]
        assert word in events, f"the page's table has no row for {event.value}"
    for state in State:
        assert state.value in targets, f"the page's table has no row ending {state.value}"
    for state in TERMINAL:
        assert f"`{state.value}`" in page.split("are terminal", 1)[0].rsplit("\n\n", 1)[1], (
            f"{state.value} is missing from the page's list of terminal states")
