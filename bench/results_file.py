"""``bench/results.json`` is written by several parts: the full bench, its
``--timeline-only`` and ``--faults-load-only`` sections, ``make explore``, ``make
mutate`` and ``make soak``. This module (standard library only, no hooks installed on
import) merges one part's figures into it, and stamps each part with when (UTC) and on
which commit it was measured (``meta.measured``).

Usage, for a part that writes a JSON object of its own (``make soak``'s fault load at
10x): ``python -m bench.results_file --section NAME FILE`` stores the object under
``NAME`` and stamps ``meta.measured.NAME``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "merge_results", "provenance", "record"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results.json"


def merge_results(previous: dict[str, Any], figures: dict[str, Any],
                  meta: dict[str, Any]) -> dict[str, Any]:
    """The full bench's figures and meta laid over what the results file already holds:
    what other parts wrote (the explorer's and mutation testing's figures, a
    ``--timeline-only`` or ``--faults-load-only`` run, ``meta.mutation``) is kept; a
    figure or target this run measured replaces its old value."""
    merged = {**previous, **figures}
    old_meta = previous.get("meta") if isinstance(previous.get("meta"), dict) else {}
    merged_meta = dict(old_meta)
    for key, value in meta.items():  # one level down: stage_s, targets_met...
        before = old_meta.get(key)
        merged_meta[key] = ({**before, **value} if isinstance(before, dict)
                            and isinstance(value, dict) else value)
    merged["meta"] = merged_meta
    return merged


def provenance(root: Path = ROOT) -> dict[str, str]:
    """When (UTC, to the second) and on which commit a figure is measured:
    ``{"at": "2026-12-05T00:12:03Z", "commit": "<sha>"}``, the sha followed by
    ``-dirty`` when tracked files differ from it ("unknown" outside a git checkout)."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True).stdout.strip()
        # the results files themselves are what the parts write: not a change of code
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no", "--", ".",
                                ":!bench/results.json", ":!bench/scale-results.json"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"at": at, "commit": "unknown"}
    return {"at": at, "commit": sha + ("-dirty" if dirty else "")}


def record(part: str, figures: dict[str, Any], path: Path = RESULTS,
           meta: dict[str, Any] | None = None,
           measured: dict[str, str] | None = None) -> dict[str, Any]:
    """Merge one part's ``figures`` (and ``meta``, one level down) into the results file
    at ``path`` and stamp ``meta.measured[part]`` with ``measured`` (default: this
    checkout's :func:`provenance`); returns what was written."""
    previous = json.loads(path.read_text()) if path.exists() else {}
    merged = merge_results(previous, figures,
                           {**(meta or {}), "measured": {part: measured or provenance()}})
    path.write_text(json.dumps(merged, indent=2) + "\n")
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.results_file",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--section", required=True, help="the key to store the object under")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("file", type=Path, help="a JSON object (what the part printed)")
    args = parser.parse_args(argv)
    try:
        section = json.loads(args.file.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(section, dict):
        print(f"{args.file} holds no JSON object", file=sys.stderr)
        return 1
    record(args.section, {args.section: section}, args.output)
    print(f"{args.section} recorded in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
