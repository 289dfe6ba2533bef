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
    table = mutation_sample.score(["old=_a+_b", "old"], 0, 15)
    assert table["old"]["mutants"] == 8  # the plain module, after the group of the same name
    assert table["all"]["mutants"] == 18 and table["all"]["survived"] == 1


def test_a_group_weighs_its_parts_as_one_module(metas: Path) -> None:
    apart = mutation_sample.score(["_a", "_b"], 3, 15)["all"]
    together = mutation_sample.score(["both=_a+_b"], 3, 15)["all"]
    assert apart["sampled"] == 6 and together["sampled"] == 3


@pytest.mark.parametrize("spec", ["=_a+_b", "old=", "old=_a++_b"])
def test_a_malformed_group_is_refused_by_name(metas: Path, spec: str) -> None:
    with pytest.raises(SystemExit, match="a group is name=part"):
        mutation_sample.verdicts(spec)


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
