"""The docs speak to users: no page says how the project was built or on which occasion
something was measured. A figure says what was measured, on what, and how to reproduce it
("on 2 vCPU, Python 3.11, in-process emulator; `make bench` reproduces it"), never "here",
"on this machine" or "in issue 28".

Each pattern below catches one kind of occasion note; ``CAUGHT`` shows a sentence it
catches and ``KEPT`` sentences of the docs it must leave alone, so that a pattern made
looser or stricter is seen to be wrong here first."""

from __future__ import annotations

import re

import pytest

from tests._docs import ROOT, pages

OCCASION_NOTES: dict[str, re.Pattern[str]] = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a session": re.compile(r"\b(?:this|last|next|in) session\b|\bsession \d+\b", re.I),
    "this machine, as where a figure was taken": re.compile(
        r"\bthis (?:2|two)[- ]core machine\b|\b(?:measured|timed|took|ran|runs?) "
        r"(?:here|on this machine)\b|\(2 cores\)", re.I),
    "a figure taken 'here'": re.compile(r"\bhere\)|\b\d[\d.,]* ?(?:ms|s|min|minutes)\s+here\b"),
    "a date of measurement": re.compile(
        r"\((?:January|February|March|April|May|June|July|August|September|October"
        r"|November|December) 20\d\d\b"),
    "earlier releases": re.compile(r"\b(?:unchanged from|as in|since) earlier releases\b"
                                   r"|\bthe earlier\b[^.]{0,20}\bdemo\b", re.I),
    "a redesign": re.compile(r"\b(?:after|before|since) the (?:[\w-]+ )?redesign\b", re.I),
    "a fixed bug's history": re.compile(r"\bnow fixed\b|\bfound and fixed\b", re.I),
    "a clone on a day": re.compile(r"\bon fresh clones on\b", re.I),
}

CAUGHT = {
    "an issue number": "Every figure below is from three runs (December 2026, issue 28).",
    "a session": "Since session 8 none of these is open.",
    "this machine, as where a figure was taken":
        "measured on fresh clones on this 2-core machine: 92 s in all",
    "a figure taken 'here'": "3 minutes for the 100,000 here)",
    "a date of measurement": "from three make bench runs (December 2026, issue 28)",
    "earlier releases": "`make demo-embedded` is the earlier, 10-second demo",
    "a redesign": "After the ledger redesign, make explore found three more.",
    "a fixed bug's history": "it found four gaps, now fixed and pinned by tests",
    "a clone on a day": "then this table (measured on fresh clones on this\n2-core machine",
}

KEPT = [
    # legitimate uses of the same words in the docs
    "what a proxy listening on this machine forwards for urllib or requests",
    "`0.0.0.0` reaches this machine too",
    "No request leaves the machine: the moment pytest loads the plugin",
    "a client that retried may have delivered an earlier attempt",
    "Here is what happens to each kind",
    "take the (`--from` beside `--from-time`)",
    "what the issue tracker says",
]


@pytest.mark.parametrize("kind", sorted(OCCASION_NOTES))
def test_each_pattern_catches_its_sample_and_no_legitimate_sentence(kind: str) -> None:
    pattern = OCCASION_NOTES[kind]
    assert pattern.search(CAUGHT[kind]), f"{kind}: misses {CAUGHT[kind]!r}"
    for sentence in KEPT:
        assert not pattern.search(sentence), f"{kind}: catches {sentence!r}"


def test_no_page_carries_an_occasion_note() -> None:
    found = []
    for path in pages():
        text = " ".join(path.read_text().split())  # a note may run over a line break
        for kind, pattern in OCCASION_NOTES.items():
            for match in pattern.finditer(text):
                context = text[max(0, match.start() - 40):match.end() + 40]
                found.append(f"{path.relative_to(ROOT)}: {kind}: ...{context}...")
    assert not found, "say what was measured, on what, and how to reproduce it:\n" + \
        "\n".join(found)
