"""``make explore``: run new seeds for a while, or replay one history with its trace.

    python -m tests.explorer.explore --minutes 5          # new seeds, report violations
    python -m tests.explorer.explore --seed 17            # replay seed 17, print its trace
    python -m tests.explorer.explore --seed 17 --shrink   # and its minimal choice list
    python -m tests.explorer.explore --choices 3,0,1,...  # replay a (shrunk) choice list
    python -m tests.explorer.explore --regressions        # every regression seed
    python -m tests.explorer.explore --mutants all        # find each known-bug mutant
    python -m tests.explorer.explore --mutant lease-lost-is-done --mutant-minutes 5
    python -m tests.explorer.explore --seed 17 --mutant NAME [--bias wake]  # replay one

A violation prints its seed, the shrunk choice list and the trace of the shrunk
history. Hash randomisation is pinned (``PYTHONHASHSEED=0``, re-exec'ing if needed) so
that a seed replays byte for byte across processes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .sim import EVENTS, Result, run_history

_STEPS = 160


def _pin_hash_seed() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.explorer.explore", *sys.argv[1:]])


def signature(result: Result) -> str | None:
    """What shrinking preserves: the first violation's code and key (never ids)."""
    if not result.violations:
        return None
    return result.violations[0][0]


def _same(result: Result, wanted: str) -> bool:
    return any(sig == wanted for sig, _ in result.violations)


def shrink(choices: list[int], wanted: str, *, budget_s: float = 120.0,
           say: Any = None, bias: str = "") -> list[int]:
    """Delete and simplify choices while the same violation persists (greedy, bounded)."""
    best = list(choices)
    deadline = time.monotonic() + budget_s
    tries = 0

    def holds(candidate: list[int]) -> bool:
        nonlocal tries
        tries += 1
        return _same(run_history(choices=candidate, trace=False, bias=bias), wanted)

    # 1. cut the tail: the shortest prefix that still fails
    lo, hi = 0, len(best)
    while lo < hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        if holds(best[:mid]):
            hi = mid
        else:
            lo = mid + 1
    if hi < len(best) and holds(best[:hi]):
        best = best[:hi]
    # 2. delete chunks, from large to single choices
    size = max(1, len(best) // 4)
    while size >= 1 and time.monotonic() < deadline:
        i = 0
        while i < len(best) and time.monotonic() < deadline:
            candidate = best[:i] + best[i + size:]
            if holds(candidate):
                best = candidate
            else:
                i += size
        size //= 2
    # 3. lower values (0 is every draw's simplest answer)
    i = 0
    while i < len(best) and time.monotonic() < deadline:
        if best[i] > 0:
            for lower in (0, best[i] - 1):
                candidate = best[:i] + [lower] + best[i + 1:]
                if holds(candidate):
                    best = candidate
                    break
        i += 1
    if say:
        say(f"shrunk {len(choices)} -> {len(best)} choices in {tries} replays")
    return best


def report(result: Result, *, shrunk: list[int] | None = None, trace: bool = True,
           bias: str = "") -> str:
    lines = [f"seed {result.seed} policy {result.policy}: {len(result.violations)} violation(s)"]
    if shrunk is None and result.seed is None:
        lines.append(f"  choice list ({len(result.choices)}): {','.join(map(str, result.choices))}")
    for code, text in result.violations:
        lines.append(f"  {code}: {text}")
    if shrunk is not None:
        lines.append(f"  minimal choice list ({len(shrunk)}): {','.join(map(str, shrunk))}")
    if trace:
        replay = run_history(choices=shrunk, bias=bias) if shrunk is not None else result
        lines.append("  trace:")
        lines.extend("    " + line for line in replay.trace)
    return "\n".join(lines)


def config_of(seed: int) -> dict[str, Any]:
    """A seed's history configuration (policy, swarm weights, handler failure rate),
    read from its first draws without running it."""
    from .choices import Chooser
    from .sim import EVENTS, HANDLER_FAILURE, POLICIES, SWARM, SWARM_WEIGHTS

    chooser = Chooser(seed, budget=10_000)
    policy = POLICIES[chooser.draw(len(POLICIES))]
    chooser.draw(3)
    swarm = {e: SWARM[chooser.draw(len(SWARM), SWARM_WEIGHTS)] for e in EVENTS}
    return {"policy": policy, "swarm": swarm,
            "handler_failure": HANDLER_FAILURE[chooser.draw(len(HANDLER_FAILURE))]}


def focused(seed: int, focus: str | None) -> bool:
    """``focus`` like ``QUEUE,pause,sqs,fail``: the policy, events the seed's swarm
    weighs at least normally, and ``fail`` for the highest handler failure rate."""
    if not focus:
        return True
    config = config_of(seed)
    for want in focus.split(","):
        if want in ("SKIP", "QUEUE", "COALESCE", "REPLACE"):
            if config["policy"] != want:
                return False
        elif want == "fail":
            if config["handler_failure"] < 0.2:
                return False
        elif config["swarm"].get(want, 0) < 1.0:
            return False
    return True


_BIAS = ""
"""The scheduler bias of this process's histories (``--bias``; set in every worker)."""


def _init_worker(mutants: tuple[str, ...], bias: str) -> None:
    """Pool initializer: bring the known bugs back in this worker process (the
    explorer's own patches, ``known_bugs``; the parent's jobguard stays as it is)."""
    global _BIAS
    from . import known_bugs

    known_bugs.switch_to(*mutants)
    _BIAS = bias


def _one(args: tuple[int, int]) -> dict[str, Any]:
    seed, steps = args
    result = run_history(seed=seed, steps=steps, trace=False, bias=_BIAS)
    return {"seed": seed, "policy": result.policy, "violations": result.violations,
            "choices": result.choices, "coverage": sorted(result.coverage),
            "requests": result.requests}


def explore(minutes: float, *, first_seed: int, steps: int, shrink_s: float,
            workers: int = 2, focus: str | None = None, bias: str = "",
            say: Any = print) -> dict[str, Any]:
    """New seeds until the time is up (``workers`` processes, each history with the
    scheduler ``bias``), then shrink each distinct violation's first history. Returns the
    summary (also printed)."""
    import multiprocessing

    started = time.monotonic()
    deadline = started + minutes * 60
    histories = requests = 0
    coverage: Counter[tuple[str, str]] = Counter()
    found: dict[str, dict[str, Any]] = {}
    next_seed = first_seed
    last_seed = first_seed
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_init_worker, initargs=((), bias)) as pool:
        pending = []
        def take() -> int:
            nonlocal next_seed
            while not focused(next_seed, focus):
                next_seed += 1
            next_seed += 1
            return next_seed - 1

        for _ in range(workers * 2):
            pending.append(pool.apply_async(_one, ((take(), steps),)))
        while pending:
            job = pending.pop(0)
            out = job.get()
            histories += 1
            requests += out["requests"]
            last_seed = max(last_seed, out["seed"])
            coverage.update(tuple(p) for p in out["coverage"])
            for sig, text in out["violations"]:
                if sig not in found or found[sig]["seed"] > out["seed"]:
                    elapsed = time.monotonic() - started
                    if sig not in found:
                        say(f"[{elapsed:7.1f}s] seed {out['seed']} ({out['policy']}): {sig}: "
                            f"{text[:160]}")
                    found[sig] = {"seed": out["seed"], "seconds": round(elapsed, 1),
                                  "policy": out["policy"], "violation": [sig, text],
                                  "choices": out["choices"]}
            if time.monotonic() < deadline:
                pending.append(pool.apply_async(_one, ((take(), steps),)))
    elapsed = time.monotonic() - started
    pairs = sorted(coverage)
    events = sorted({e for _, e in pairs})
    summary = {"histories": histories, "seconds": round(elapsed, 1),
               "histories_per_s": round(histories / elapsed, 2),
               "requests_per_s": round(requests / elapsed, 1), "workers": workers,
               "coverage_pairs": len(pairs), "distinct_violations": len(found),
               "bias": bias,
               "found": found, "seeds": [first_seed, last_seed]}
    say(f"\n{histories} histories in {elapsed:.0f} s on {workers} worker(s): "
        f"{summary['histories_per_s']} histories/s, {summary['requests_per_s']} AWS requests/s; "
        f"seeds {first_seed}..{last_seed}")
    say(f"coverage: {len(pairs)} (trigger or lease-row state, event) pairs over {len(events)} "
        f"events ({len(EVENTS)} event kinds):")
    for state in sorted({s for s, _ in pairs}):
        reached = sorted(e for s, e in pairs if s == state)
        say(f"  {state:>24}: {len(reached):3d}  {' '.join(reached)[:150]}")
    say(f"{len(found)} distinct violation(s)")
    for sig, info in sorted(found.items(), key=lambda kv: kv[1]["seconds"]):
        say(f"  {info['seconds']:7.1f}s  seed {info['seed']:>7}  {sig}")
    from .known import BUGS, bug_of

    first: dict[int, dict[str, Any]] = {}
    for sig, info in sorted(found.items(), key=lambda kv: kv[1]["seconds"]):
        bug = bug_of(sig)
        if bug is not None and bug not in first:
            first[bug] = {"seed": info["seed"], "seconds": info["seconds"], "signature": sig}
    summary["known_bugs_found"] = {str(k): v for k, v in sorted(first.items())}
    summary["known_bugs_total"] = len(BUGS)
    say(f"known behaviours found (issue 14's eleven, issue 33's #12): {len(first)} of "
        f"{len(BUGS)}")
    for bug, text in BUGS.items():
        hit = first.get(bug)
        say(f"  #{bug:<2} {text[:62]:<62} " + (
            f"{hit['seconds']:7.1f}s seed {hit['seed']}" if hit else "      -"))
    unknown = sorted(sig for sig in found if bug_of(sig) is None)
    if unknown:
        say(f"not a known behaviour (look at their traces): {unknown}")
    if shrink_s > 0:
        for sig, info in sorted(found.items(), key=lambda kv: kv[1]["seconds"]):
            say(f"\n=== {sig} (seed {info['seed']}, found after {info['seconds']} s)")
            shrunk = shrink(info["choices"], sig, budget_s=shrink_s, say=say, bias=bias)
            info["choices"] = shrunk
            replay = run_history(choices=shrunk, bias=bias)
            replay.seed = info["seed"]
            say(report(replay, bias=bias))
    return summary


MUTANT_SHAPES: dict[str, tuple[str, str]] = {
    # mutant -> (--focus, --bias): the history shapes each defect lives in
    "release-prunes-from-old-read": ("QUEUE,sqs,fail", "late"),
    "force-release-erases-run": ("force", ""),
    "paused-queue-retry-loops": ("QUEUE,pause,sqs,fail", "pause"),
    "lost-release-forgets": ("QUEUE,sqs", "wake"),
    "coalesce-undo-strands": ("COALESCE,sqs", ""),
    "replace-displaced-retryable": ("REPLACE,retick", ""),
    "lease-lost-is-done": ("QUEUE,sqs,clock", ""),
    "queued-forgotten-early": ("QUEUE,sqs", "late"),
    "lease-row-grows": ("SKIP,burst", ""),
    "fence-restarts": ("damage", ""),
    "future-tick-runs": ("future_tick", "late"),
    "garbage-message-returned": ("QUEUE,sqs", "garbage"),
    "link-ignores-hand-off": ("", "chain"),
}


def mutant_bug(name: str) -> int:
    """The behaviour number (``known.BUGS``) a known bug brings back."""
    from .known_bugs import number

    return number(name)


def hunt_mutant(name: str, *, minutes: float, first_seed: int, steps: int, workers: int = 2,
                focus: str | None = None, bias: str | None = None,
                say: Any = print) -> dict[str, Any]:
    """New seeds with known bug ``name`` brought back in every worker until the model reports
    a violation ``known.bug_of`` attributes to its behaviour, or ``minutes`` pass."""
    import multiprocessing

    from .known import bug_of

    shape_focus, shape_bias = MUTANT_SHAPES.get(name, ("", ""))
    focus = shape_focus if focus is None else focus
    bias = shape_bias if bias is None else bias
    bug = mutant_bug(name)
    started = time.monotonic()
    deadline = started + minutes * 60
    histories = 0
    next_seed = first_seed
    hit: dict[str, Any] | None = None
    other: dict[str, int] = {}
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_init_worker, initargs=((name,), bias)) as pool:
        def take() -> int:
            nonlocal next_seed
            while not focused(next_seed, focus):
                next_seed += 1
            next_seed += 1
            return next_seed - 1

        pending = [pool.apply_async(_one, ((take(), steps),)) for _ in range(workers * 2)]
        while pending:
            try:  # a history that hangs (a deadlocked actor) ends the hunt, not the run
                out = pending.pop(0).get(timeout=max(5.0, deadline - time.monotonic()) + 90)
            except multiprocessing.TimeoutError:
                say(f"  {name}: a history did not finish; hunt stopped")
                break
            histories += 1
            for sig, text in out["violations"]:
                if bug_of(sig) == bug:
                    if hit is None:
                        hit = {"seed": out["seed"], "signature": sig, "text": text[:300],
                               "seconds": round(time.monotonic() - started, 1),
                               "histories": histories}
                    break
                other.setdefault(sig, out["seed"])
            if hit is None and time.monotonic() < deadline:
                pending.append(pool.apply_async(_one, ((take(), steps),)))
        pool.terminate()
    result = {"mutant": name, "bug": bug, "focus": focus, "bias": bias,
              "seconds": hit["seconds"] if hit else None, "histories": histories,
              "found": hit, "other_violations": other}
    if hit:
        say(f"  {name:<30} #{bug:<2} found in {hit['seconds']:6.1f} s ({histories} histories)"
            f": seed {hit['seed']} {hit['signature']}")
        say(f"      replay: make explore SEED={hit['seed']} EXPLORE_ARGS=\"--mutant {name}"
            + (f" --bias {bias}" if bias else "") + '"')
    else:
        say(f"  {name:<30} #{bug:<2} NOT found in {minutes:g} min ({histories} histories)")
    return result


def main(argv: list[str] | None = None) -> int:
    _pin_hash_seed()
    parser = argparse.ArgumentParser(prog="explore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--choices", help="a comma-separated choice list to replay")
    parser.add_argument("--shrink", action="store_true", help="shrink the seed's violation")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--first-seed", type=int, default=None)
    parser.add_argument("--steps", type=int, default=_STEPS)
    parser.add_argument("--shrink-seconds", type=float, default=60.0,
                        help="per distinct violation, after exploring (0: no shrinking)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--focus", help="only seeds whose configuration has these, e.g. "
                        "QUEUE,pause,sqs,fail (policy, events weighed at least normally, "
                        "fail = the highest handler failure rate)")
    parser.add_argument("--regressions", action="store_true")
    parser.add_argument("--mutant", help="a known bug (tests/explorer/known_bugs.py) to bring "
                        "back in every worker: hunt it (or, with --seed/--choices, replay)")
    parser.add_argument("--mutants", help="'all' or a comma-separated list: hunt each in turn")
    parser.add_argument("--mutant-minutes", type=float, default=10.0,
                        help="the budget per mutant (default 10)")
    parser.add_argument("--bias", default=None, help="scheduler bias: wake, late, pause, "
                        "garbage or strangers (see sim.BIASES)")
    parser.add_argument("--bench", help="record the figures (the known-bug hunt's, or a "
                        "timed run's explore_*) in this results.json, with when and on "
                        "which commit")
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args(argv)
    if args.mutants or (args.mutant and args.seed is None and args.choices is None):
        from .known_bugs import KNOWN, compile_bug

        names = ([args.mutant] if args.mutant else list(KNOWN)
                 if args.mutants == "all" else args.mutants.split(","))
        for name in names:  # every patch still fits before any hunt starts
            if name not in KNOWN:
                parser.error(f"--mutant(s): unknown known bug {name!r}: one of {sorted(KNOWN)}")
            compile_bug(KNOWN[name])
        first = args.first_seed if args.first_seed is not None else 900_000
        print(f"known-bug mutants: {len(names)}, up to {args.mutant_minutes:g} min each, "
              f"{args.workers} workers, seeds from {first}")
        results = [hunt_mutant(n, minutes=args.mutant_minutes, first_seed=first,
                               steps=args.steps, workers=args.workers, focus=args.focus,
                               bias=args.bias) for n in names]
        found = sum(r["seconds"] is not None for r in results)
        print(f"known bugs found: {found} of {len(results)}")
        if args.json:
            with open(args.json, "w") as out:
                json.dump(results, out, indent=2, default=str)
        if args.bench:
            from bench.results_file import record

            record("explore_known_bugs", {
                "explore_known_bugs_found": found,
                "explore_known_bugs_total": len(KNOWN),
                "explore_known_bugs": {r["mutant"]: r["seconds"] for r in results},
            }, Path(args.bench))
        return 0 if found == len(results) else 1
    if args.mutant:
        from . import known_bugs

        known_bugs.switch_to(args.mutant)
    bias = args.bias or ""
    if args.regressions:
        from .regressions import REGRESSIONS

        bad = 0
        for reg in REGRESSIONS:
            result = run_history(choices=list(reg.choices), trace=False)
            state = "FAILS" if result.violations else "holds"
            bad += bool(result.violations)
            print(f"{state}: seed {reg.seed} ({reg.bug}): "
                  f"{result.violations[0] if result.violations else ''}")
        return 1 if bad else 0
    if args.choices is not None:
        choices = [int(c) for c in args.choices.split(",") if c.strip()]
        result = run_history(choices=choices, bias=bias)
        print(report(result, bias=bias))
        return 1 if result.violations else 0
    if args.seed is not None:
        result = run_history(seed=args.seed, steps=args.steps, bias=bias)
        shrunk = None
        if args.shrink and result.violations:
            shrunk = shrink(result.choices, signature(result) or "", budget_s=args.shrink_seconds,
                            say=print, bias=bias)
        print(report(result, shrunk=shrunk, bias=bias))
        return 1 if result.violations else 0
    first = args.first_seed if args.first_seed is not None else int(time.time()) % 1_000_000
    summary = explore(args.minutes, first_seed=first, steps=args.steps,
                      shrink_s=args.shrink_seconds, workers=args.workers, focus=args.focus,
                      bias=bias)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=2, default=str)
    if args.bench:
        from bench.results_file import record

        record("explore", {
            "explore_minutes": args.minutes, "explore_histories": summary["histories"],
            "explore_histories_per_s": summary["histories_per_s"],
            "explore_requests_per_s": summary["requests_per_s"],
            "explore_coverage_pairs": summary["coverage_pairs"],
            "explore_violations": summary["distinct_violations"],
        }, Path(args.bench))
    return 1 if summary["distinct_violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
