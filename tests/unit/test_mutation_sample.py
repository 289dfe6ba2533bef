"""The mutation sampler's groups: a split module sampled as the module it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import mutation_sample

pytestmark = pytest.mark.fast


def _meta(root: Path, module: str, codes: dict[str, int | None]) -> None:
    (root / f"{module}.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))


@pytest.fixture
def metas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mutation_sample, "META_ROOT", tmp_path)
    monkeypatch.setattr(mutation_sample, "EQUIVALENTS", tmp_path / "none.txt")
    _meta(tmp_path, "old", {f"jobguard.old.f__mutmut_{i}": 1 for i in range(1, 9)})
    _meta(tmp_path, "_a", {f"jobguard._a.f__mutmut_{i}": 1 for i in range(1, 7)})
    _meta(tmp_path, "_b", {**{f"jobguard._b.g__mutmut_{i}": 1 for i in range(1, 4)},
                           "jobguard._b.g__mutmut_4": 0})
    return tmp_path


def test_a_group_samples_the_union_of_its_parts_under_its_own_name(metas: Path) -> None:
    whole = mutation_sample.sample("old=_a+_b", 0, 15)
    assert len(whole) == 10 and {n.split(".")[1] for n in whole} == {"_a", "_b"}
    # a smaller sample is a prefix of a larger one, as for a plain module
    assert set(mutation_sample.sample("old=_a+_b", 4, 15)) < set(
        mutation_sample.sample("old=_a+_b", 6, 15))
    # seeded by the group's name: the order of its parts draws the same mutants, and the
    # row is the group's name
    assert mutation_sample.sample("old=_b+_a", 4, 15) == mutation_sample.sample(
        "old=_a+_b", 4, 15)
    assert mutation_sample.sample("new=_a+_b", 0, 15) == whole
    table = mutation_sample.score(["old=_a+_b"], 0, 15)
    assert set(table) == {"old", "all"}
    assert table["all"]["mutants"] == 10 and table["all"]["survived"] == 1


def test_a_group_weighs_its_parts_as_one_module(metas: Path) -> None:
    apart = mutation_sample.score(["_a", "_b"], 3, 15)["all"]
    together = mutation_sample.score(["both=_a+_b"], 3, 15)["all"]
    assert apart["sampled"] == 6 and together["sampled"] == 3


@pytest.mark.parametrize("spec", ["=_a+_b", "old=", "old=_a++_b",
                                  "x=_a+_b=_a"])  # not a nested group: _b's would vanish
def test_a_malformed_group_is_refused_by_name(metas: Path, spec: str) -> None:
    with pytest.raises(SystemExit, match="a group is name=part"):
        mutation_sample.verdicts(spec)


@pytest.mark.parametrize("modules", [["both=_a+_b", "_a"], ["old=_a+_b", "old"],
                                     ["x=_a", "y=_a+_b"]])
def test_a_module_sampled_twice_is_refused_not_counted_twice(
        metas: Path, modules: list[str]) -> None:
    with pytest.raises(SystemExit, match="more than once"):
        mutation_sample.score(modules, 0, 15)
    with pytest.raises(SystemExit, match="more than once"):
        mutation_sample.main(["names", "--modules", ",".join(modules)])


def test_the_recorded_scope_names_the_groups(metas: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: dict[str, object] = {}
    monkeypatch.setattr("bench.results_file.record",
                        lambda section, figures, path: recorded.update(figures))
    assert mutation_sample.main(["score", "--modules", "old=_a+_b", "--size", "3",
                                 "--bench", str(tmp_path / "r.json")]) == 0
    assert str(recorded["mutation_scope"]).startswith(
        "make mutate SAMPLE=3 over 1 protocol modules (old), ")


def test_the_makefiles_origins_name_every_protocol_module_once() -> None:
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()

    def line(key: str) -> str:
        return next(row for row in makefile.splitlines() if row.startswith(key))

    modules = set(line("MODULES ?=").split("=", 1)[1].strip().split(","))
    parts: list[str] = []
    for spec in line("MUTATE_BY_ORIGIN :=").split(":=", 1)[1].strip().split(","):
        name, sep, members = spec.partition("=")
        parts += members.split("+") if sep else [name]
    assert sorted(parts) == sorted(modules)
