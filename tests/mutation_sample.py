"""`make mutate SAMPLE=N`: a seeded random sample of each module's mutants, and its score.

mutmut generates every mutant of the files in ``[tool.mutmut] only_mutate`` (about 6,000
for the protocol modules); on this 2-core machine each takes 5 s (killed early) to 100 s
(a survivor runs every test that reaches it, the CI explorer run included), so a full
pass takes days. Random mutant sampling estimates the same score from a fraction of the
mutants (Wong & Mathur; Zhang et al., ICSE 2013: a few hundred random mutants per program
estimate the full score within a few points). The sample is uniform within each module
and seeded, so a run can be repeated and continued: mutmut keeps every verdict in
``.mutmut/mutants/**/*.meta`` and a second run only checks what is still unchecked.

    python -m tests.mutation_sample names --modules guard,run --size 300 --only unchecked
    python -m tests.mutation_sample score --modules guard,run --size 300 --seed 15

``score`` reads the verdicts and the equivalents listed in ``docs/mutation-equivalent.txt``
(one ``<mutant name>  <why>`` per line) and prints, per module and in all: sampled,
checked, killed (timeouts count as killed, as mutmut counts them), survived, no tests,
equivalent, and the score killed / (checked - equivalent) with a 95% Wilson interval.
``--json FILE`` also writes them. Standard library only.

A module may also be a group, ``name=part+part+...``: its mutants are the union of its
parts', sampled as one. Splitting a module into several spreads the same code over more
modules, and a fixed number per module then weighs the split code more; sampling each
module's successors as the module it came from keeps two commits' samples comparable
(``make mutate BY_ORIGIN=1``; the Makefile names the groups in ``MUTATE_BY_ORIGIN``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

META_ROOT = Path(".mutmut/mutants/src/jobguard")
EQUIVALENTS = Path("docs/mutation-equivalent.txt")

KILLED = {1, 3, 24, -24, 36, 152, 255}
SURVIVED = {0}
NO_TESTS = {5, 33}


def verdicts(module: str) -> dict[str, int | None]:
    """Every mutant of the module (or of each part of a ``name=a+b`` group) and its exit
    code, None while unchecked."""
    name, sep, parts = module.partition("=")
    if sep:
        if not name or not all(p and "=" not in p for p in parts.split("+")):
            raise SystemExit(f"{module!r}: a group is name=part+part+..., each part a module")
        merged: dict[str, int | None] = {}
        for part in parts.split("+"):
            merged.update(verdicts(part))
        return merged
    meta = META_ROOT / f"{module}.py.meta"
    if not meta.exists():
        raise SystemExit(f"{meta}: no mutants generated for {module!r} (run make mutate once, "
                         "or add the file to [tool.mutmut] only_mutate)")
    data = json.loads(meta.read_text())
    return dict(data["exit_code_by_key"])


def check_modules(modules: list[str]) -> None:
    """Refuse a list that would score some mutants twice or hide a row: a module named
    twice (alone or as a part), or two rows of one name."""
    rows = [m.partition("=")[0] for m in modules]
    parts = [p for m in modules for p in (m.partition("=")[2].split("+") if "=" in m else [m])]
    for what, names in (("row", rows), ("module", parts)):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SystemExit(f"--modules names the {what} {', '.join(twice)} more than once: "
                             "each module is sampled once, alone or in one group")


def sample(module: str, size: int, seed: int) -> list[str]:
    """The first ``size`` mutants of a seeded shuffle of the module's mutants: a smaller
    sample is a prefix of a larger one, so growing a sample reuses every verdict."""
    names = sorted(verdicts(module))
    random.Random(f"{seed}:{module.partition('=')[0]}").shuffle(names)
    return sorted(names if size <= 0 else names[:size])


def equivalents() -> dict[str, str]:
    if not EQUIVALENTS.exists():
        return {}
    found: dict[str, str] = {}
    for line in EQUIVALENTS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            found[name] = why.strip()
    return found


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def score(modules: list[str], size: int, seed: int) -> dict[str, dict[str, object]]:
    check_modules(modules)
    equivalent = equivalents()
    table: dict[str, dict[str, object]] = {}
    total = {"mutants": 0, "sampled": 0, "checked": 0, "killed": 0, "survived": 0,
             "no_tests": 0, "equivalent": 0}
    for module in modules:
        codes = verdicts(module)
        chosen = sample(module, size, seed)
        row = {"mutants": len(codes), "sampled": len(chosen), "checked": 0, "killed": 0,
               "survived": 0, "no_tests": 0, "equivalent": 0}
        for name in chosen:
            code = codes.get(name)
            if code is None:
                continue
            row["checked"] += 1
            if name in equivalent:
                row["equivalent"] += 1
            elif code in KILLED:
                row["killed"] += 1
            elif code in SURVIVED:
                row["survived"] += 1
            elif code in NO_TESTS:
                row["no_tests"] += 1
        for key in total:
            total[key] += row[key]
        table[module.partition("=")[0]] = _with_score(row)
    table["all"] = _with_score(total)
    return table


def _with_score(row: dict[str, int]) -> dict[str, object]:
    judged = row["checked"] - row["equivalent"]
    low, high = wilson(row["killed"], judged)
    return {**row, "score": round(row["killed"] / judged, 4) if judged else None,
            "score_95": [round(low, 4), round(high, 4)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation_sample")
    parser.add_argument("command", choices=("names", "score"))
    parser.add_argument("--modules", required=True,
                        help="comma-separated module names under jobguard/, e.g. guard,run; "
                             "a group name=a+b is sampled as one module")
    parser.add_argument("--size", type=int, default=0,
                        help="mutants per module (0: all of them)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--only", choices=("all", "unchecked", "survivors"), default="all",
                        help="names: every sampled mutant, those without a verdict yet, or "
                             "those that survived or had no tests (to check them again "
                             "after new tests)")
    parser.add_argument("--json", type=Path, help="score: also write the table here")
    parser.add_argument("--bench", type=Path, help="score: also record the overall score "
                        "(mutation_*) in this results.json, with when and on which commit")
    args = parser.parse_args(argv)
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    check_modules(modules)
    if args.command == "names":
        for module in modules:
            codes = verdicts(module)
            for name in sample(module, args.size, args.seed):
                code = codes.get(name)
                if (args.only == "all" or (args.only == "unchecked" and code is None)
                        or (args.only == "survivors" and code in SURVIVED | NO_TESTS)):
                    print(name)
        return 0
    table = score(modules, args.size, args.seed)
    print(f"{'module':<14} {'mutants':>7} {'sampled':>7} {'checked':>7} {'killed':>6} "
          f"{'survived':>8} {'no tests':>8} {'equiv':>5} {'score':>6}  95% interval")
    for module, row in table.items():
        interval = row["score_95"]
        assert isinstance(interval, list)
        print(f"{module:<14} {row['mutants']:>7} {row['sampled']:>7} {row['checked']:>7} "
              f"{row['killed']:>6} {row['survived']:>8} {row['no_tests']:>8} "
              f"{row['equivalent']:>5} {row['score'] if row['score'] is not None else '-':>6}"
              f"  {interval[0]:.3f}-{interval[1]:.3f}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    if args.bench:
        _record(args.bench, table["all"], [m.partition("=")[0] for m in modules], args.size)
    return 0


def _record(path: Path, total: dict[str, object], modules: list[str], size: int) -> None:
    """The overall row as the results file names it (``make mutate RECORD=1``)."""
    from bench.results_file import record

    checked, equivalent = total["checked"], total["equivalent"]
    assert isinstance(checked, int) and isinstance(equivalent, int)
    record("mutation", {
        "mutation_score": total["score"], "mutation_score_interval": total["score_95"],
        "mutation_killed": total["killed"], "mutation_non_equivalent": checked - equivalent,
        "mutation_sampled": total["sampled"], "mutation_mutants": total["mutants"],
        "mutation_scope": f"make mutate SAMPLE={size} over {len(modules)} protocol modules "
                          f"({', '.join(modules)}), a seeded sample of {size or 'all'} "
                          f"mutants each, of {total['mutants']}",
    }, path)


if __name__ == "__main__":
    sys.exit(main())
