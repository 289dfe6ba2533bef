"""``pip install 'jobguard[testing]'`` timed and weighed as a new user meets it (issue 29,
row 6: at most 90 s and 150 MB): the wheel built as the README says, a fresh virtual
environment (``python3 -m venv``), then the README's install of the wheel with its
``testing`` extra, with pip's cache off (what a first install downloads). Recorded in
``bench/results.json`` (stamped ``meta.measured.testing_extra``: when, and on which
commit): ``testing_extra_install_s`` (the pip install, wall) and ``testing_extra_mb``
(what it adds to the fresh venv, ``du`` in MiB), each the larger of the runs; the runs,
the bare venv's and the whole venv's size under ``meta.testing_extra``.

    .venv/bin/python -m bench.testing_extra [--runs 2] [--extra testing]

It downloads from the package index (about 40 MB); ``make bench`` does not run it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.results_file import RESULTS, ROOT, record

BUDGET_S = 90.0
BUDGET_MB = 150.0


def du_mb(path: Path) -> float:
    """Disk usage of ``path`` in MiB, as ``du -sk`` counts it (blocks, not lengths)."""
    kib = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True,
                         text=True).stdout.split()[0]
    return round(int(kib) / 1024, 1)


def build_wheel(into: Path) -> Path:
    """The README's ``python3 -m pip wheel --no-deps -w dist .``, from this checkout."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(into), str(ROOT)], check=True, cwd=into)
    (wheel,) = into.glob("jobguard-*.whl")
    return wheel


def one_install(python: str, wheel: Path, extra: str, where: Path) -> dict[str, Any]:
    """A fresh venv at ``where``, then ``pip install 'WHEEL[extra]'`` timed and weighed."""
    subprocess.run([python, "-m", "venv", str(where)], check=True)
    bare = du_mb(where)
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    subprocess.run([str(where / "bin" / "pip"), "install", "-q", f"{wheel}[{extra}]"],
                   check=True, env=env, cwd=where.parent, stdout=subprocess.DEVNULL)
    seconds = round(time.monotonic() - started, 1)
    venv = du_mb(where)
    packages = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "list",
                               "--format=freeze"], check=True, capture_output=True,
                              text=True, env=env).stdout.split()
    return {"install_s": seconds, "added_mb": round(venv - bare, 1), "venv_mb": venv,
            "bare_venv_mb": bare, "packages": len(packages)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.testing_extra",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="fresh installs (default: 2)")
    parser.add_argument("--extra", default="testing",
                        help="the extra to install (default: testing; only 'testing' "
                             "is recorded)")
    parser.add_argument("--python", default=shutil.which("python3") or sys.executable,
                        help="the interpreter that makes the venv (default: python3)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    work = Path(tempfile.mkdtemp(prefix="jobguard-extra-"))
    try:
        wheel = build_wheel(work)
        runs = []
        for n in range(1, args.runs + 1):
            run = one_install(args.python, wheel, args.extra, work / f"venv{n}")
            print(f"[bench] pip install 'jobguard[{args.extra}]' into a fresh venv, run {n}: "
                  f"{run['install_s']} s, +{run['added_mb']} MB ({run['venv_mb']} MB venv, "
                  f"{run['packages']} packages)", flush=True)
            runs.append(run)
            shutil.rmtree(work / f"venv{n}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = max(r["install_s"] for r in runs)
    added = max(r["added_mb"] for r in runs)
    if args.extra != "testing":
        return 0
    python = subprocess.run([args.python, "--version"], check=True, capture_output=True,
                            text=True).stdout.strip()
    record("testing_extra", {"testing_extra_install_s": seconds, "testing_extra_mb": added},
           args.output, meta={
               "testing_extra": {"runs": runs, "python": python, "pip_cache": "off",
                                 "mb": "MiB added to a fresh venv (du -sk)",
                                 "budget": {"install_s": BUDGET_S, "mb": BUDGET_MB}},
               "targets_met": {"testing_extra": seconds <= BUDGET_S and added <= BUDGET_MB}})
    print(f"[bench] recorded testing_extra_install_s={seconds}, testing_extra_mb={added} "
          f"in {args.output} (budget {BUDGET_S:g} s, {BUDGET_MB:g} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
