"""``make test`` on a fresh clone of this repository, timed as the README reports it:
``make_test_s`` (wall, the installs included: a clone has no .venv, .venv-ministack or
node_modules) and ``pytest_s`` (pytest's own figure), with the test counts, recorded in
``bench/results.json`` (stamped ``meta.measured.fresh_clone``: when, and on which
commit). The clone is of the committed ``HEAD``; the package caches of pip, uv and npm
are the machine's own, as on CI.

    .venv/bin/python -m bench.fresh_clone [--target unit] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.results_file import RESULTS, ROOT, provenance, record

SUMMARY = re.compile(r"^=*\s*(?P<counts>(?:\d+ \w+(?:, )?)+) in (?P<s>[\d.]+)s")


def counts(line: str) -> dict[str, int]:
    """``"1804 passed, 1 skipped"`` -> ``{"passed": 1804, "skipped": 1}``."""
    return {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", line)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fresh_clone",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("test", "unit"), default="test",
                        help="the make target to time (default: test)")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    where = Path(tempfile.mkdtemp(prefix="jobguard-clone-"))
    clone = where / "jobguard"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    print(f"[bench] make {args.target} in a fresh clone: {clone}", flush=True)
    started = time.monotonic()
    # The clone tests its own files: a PYTHONPATH or an active venv of this checkout
    # would put this checkout's library (and its paths) ahead of the clone's.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen(["make", args.target], cwd=clone, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    summary: re.Match[str] | None = None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        summary = SUMMARY.match(line.strip()) or summary
    status = proc.wait()
    wall = round(time.monotonic() - started, 1)
    measured = provenance(clone)  # the clone's commit (this checkout may have edits)
    if not args.keep:
        shutil.rmtree(where, ignore_errors=True)
    if status != 0 or summary is None:
        print(f"[bench] make {args.target} failed (exit {status}) after {wall} s: "
              "nothing recorded", file=sys.stderr)
        return 1
    prefix = "make_test" if args.target == "test" else "make_unit"
    tested = counts(summary.group("counts"))
    figures = {f"{prefix}_s": wall, f"{prefix}_pytest_s": float(summary.group("s")),
               f"{prefix}_tests": tested}
    if args.target == "test":  # the names issue 28 gave them
        figures["pytest_s"] = figures.pop("make_test_pytest_s")
    record(f"fresh_clone_{args.target}", figures, args.output, measured=measured)
    print(f"[bench] make {args.target} on a fresh clone: {wall} s wall, pytest "
          f"{summary.group('s')} s ({summary.group('counts')}); recorded in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
