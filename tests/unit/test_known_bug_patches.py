"""Production code carries no test switches (issue 29, row 9): the known bugs the
explorer hunts live in ``tests/explorer/known_bugs.py`` as source patches, applied in the
test's or the explorer's own process.

GIVEN today's ``lib/jobguard`` WHEN each known bug's patches are applied THEN each
correct text occurs exactly once, the patched modules compile and the live functions
are swapped, and back; a patch that drifted fails naming the bug and the module; and
nothing in the package (nor in the Lambda asset) knows of a switch.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import jobguard
from jobguard.errors import DamagedRowError
from jobguard.lease import parse_lease
from tests.explorer import known_bugs
from tests.explorer.explore import MUTANT_SHAPES
from tests.explorer.known import BUGS
from tests.explorer.known_bugs import KNOWN, KnownBug, Patch, PatchError

PACKAGE = Path(str(jobguard.__file__)).parent
# what a switch looked like: the module, its lookup, the store's helpers, the env variable
SWITCH_MARKS = ("_mutants", "mutant_", "JOBGUARD_TEST_MUTANT", "known_bugs", *KNOWN)
HELD_WITHOUT_FENCE = {"pk": "JOB#j", "sk": "LEASE", "run_id": "r1", "holder_owner": "w",
                      "trigger_id": "t", "acquired_at_ms": 1, "expires_at_ms": 2,
                      "heartbeat_at_ms": 1}


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).read_text()


@pytest.mark.parametrize("name", list(KNOWN))
def test_each_known_bug_patch_applies_exactly_once_to_todays_lib_and_compiles(name: str) -> None:
    bug = KNOWN[name]
    for patch in bug.patches:
        assert patch.module.startswith("jobguard.")
        assert _source(patch.module).count(patch.correct) == 1, (name, patch.module)
        assert patch.buggy != patch.correct
    for module in {p.module for p in bug.patches}:
        compile(known_bugs.patched_source(bug, module, _source(module)), module, "exec")
    swaps = known_bugs.compile_bug(bug)
    assert swaps, name
    for function, original, buggy in swaps:
        assert function.__code__ is original and buggy is not original


def test_the_known_bugs_are_issue_14s_eleven_33s_garbage_message_and_30s_link() -> None:
    assert sorted(bug.number for bug in KNOWN.values()) == sorted(BUGS) == list(range(1, 14))
    assert sorted(MUTANT_SHAPES) == sorted(KNOWN)  # every hunt has its history shape


def test_a_patch_whose_correct_text_drifted_fails_naming_the_bug_and_the_module() -> None:
    gone = KnownBug("drifted", 1, "", (Patch("jobguard.lease", "no such text\n", "x\n"),))
    twice = KnownBug("ambiguous", 1, "", (Patch("jobguard.lease", "return ", "return  "),))
    for bug, count in ((gone, 0), (twice, None)):
        with pytest.raises(PatchError) as refused:
            known_bugs.compile_bug(bug)
        assert f"known bug {bug.name!r}" in str(refused.value)
        assert "jobguard.lease" in str(refused.value) and "lease.py" in str(refused.value)
        if count == 0:
            assert "occurs 0 times" in str(refused.value)


def test_a_patch_outside_function_bodies_or_that_does_not_compile_is_refused() -> None:
    constant = KnownBug("constant", 1, "", (Patch(
        "jobguard.lease", '__all__ = ["Acquired",', '__all__ = ["Acquiredd",'),))
    broken = KnownBug("broken", 1, "", (Patch(
        "jobguard.lease", "    if fence is None and ever_held:\n",
        "    if fence is None and ever_held\n"),))
    with pytest.raises(PatchError, match="outside function bodies"):
        known_bugs.compile_bug(constant)
    with pytest.raises(PatchError, match="does not compile"):
        known_bugs.compile_bug(broken)


def test_switching_changes_the_functions_already_imported_and_switches_back() -> None:
    """GIVEN ``parse_lease`` imported before any switch WHEN ``fence-restarts`` is
    switched on THEN that same function reads a held row without a fence as fence 0;
    a bad switch leaves it so; switched off, it refuses the row again."""
    assert known_bugs.active() == ()
    with pytest.raises(DamagedRowError):
        parse_lease("j", HELD_WITHOUT_FENCE)
    try:
        known_bugs.switch_to("fence-restarts")
        assert parse_lease("j", HELD_WITHOUT_FENCE).fence == 0
        with pytest.raises(PatchError, match="unknown known bug"):
            known_bugs.switch_to("no-such-bug")
        assert known_bugs.active() == ("fence-restarts",)
        assert parse_lease("j", HELD_WITHOUT_FENCE).fence == 0
    finally:
        known_bugs.switch_to()
    assert known_bugs.active() == ()
    with pytest.raises(DamagedRowError):
        parse_lease("j", HELD_WITHOUT_FENCE)


def test_lib_jobguard_contains_and_consults_no_known_bug_switch() -> None:
    """Every file of the installed package: no switch module, no lookup, no bug name."""
    files = [p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) > 20 and not (PACKAGE / "_mutants.py").exists()
    hits = [f"{p.relative_to(PACKAGE)}: {mark}" for p in files
            for mark in SWITCH_MARKS if mark in p.read_text(errors="replace")]
    assert hits == []


@pytest.mark.synth  # jobguard.cdk imports the construct library
def test_the_lambda_asset_ships_no_known_bug_switch(tmp_path: Path) -> None:
    from jobguard.cdk.bundle import stage_code

    staged = stage_code([PACKAGE], tmp_path) / "jobguard"
    shipped = [p for p in staged.rglob("*") if p.is_file()]
    assert (staged / "guard.py") in shipped and (staged / "dynamodb.py") in shipped
    assert not (staged / "_mutants.py").exists()
    assert [str(p) for p in shipped for mark in SWITCH_MARKS
            if mark in p.read_text(errors="replace")] == []
