"""The README is the front door: every figure in it is filled in, none is a placeholder
left from writing it before the measurement (``TEST_FRESH``, ``UNIT_TIME`` ...)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = re.compile(
    r"\b(?:[A-Z]+_)+(?:FRESH|COUNT|TIME|WARM|RATIOS|AFTER|MS|S)\b|\bFINAL_EXPLORER\b")


def test_the_readme_has_no_placeholder_for_a_figure() -> None:
    for name in ("README.md", "bench/README.md", "docs/deploying.md"):
        text = (ROOT / name).read_text()
        left = sorted(set(PLACEHOLDER.findall(text)))
        assert left == [], f"{name} still holds {left}"


def test_the_placeholder_pattern_finds_what_it_is_for() -> None:
    assert PLACEHOLDER.findall("pytest PYTEST_FRESH, TEXT_MS ms, READ_S s, UNIT_TIME") == [
        "PYTEST_FRESH", "TEXT_MS", "READ_S", "UNIT_TIME"]
    assert PLACEHOLDER.findall("JOBGUARD_TABLE, AWS_ENDPOINT_URL, TEST_WORKERS") == []
