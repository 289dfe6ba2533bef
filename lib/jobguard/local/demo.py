"""``make demo``: the real stack on a local AWS, then every failure drill against it.

1. starts MiniStack (the local AWS) on 127.0.0.1 and a free port;
2. deploys the CDK stack into it with the CDK CLI (``cdk bootstrap`` + ``cdk deploy``),
   the same stack a user deploys to AWS (see :mod:`jobguard.local.deploy` for the two
   local context values and why), then checks what it created through the AWS APIs;
3. runs ``jobguard drill`` against it and prints, per drill, what it injected and what
   it checked on each side, then the table. Exit code 0 only when every drill held.

It ends by writing ``.local/drills.html`` (every drill's checks and timeline, one
self-contained page) and printing its path; a selection of drills writes a page of its
own (``--job report-export``: ``.local/drills-report-export.html``), so that it never
replaces the whole demo's page. ``--json FILE`` also writes the drills'
summary; ``--only NAME`` runs one drill;
``--keep`` leaves the local AWS running (its endpoint is printed) for ``jobguard``
commands, and notes it in ``.local/kept.json``; ``--stop`` (``make demo-stop``) stops
the kept one and says what it removed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .ministack import ROOT, VERSION, WORKDIR_PREFIX, LocalStack

__all__ = ["drills_page_path", "kept_lines", "main", "page_lines"]


class _Progress:
    """Each line with the time since the demo started; while a step is quiet for 20 s,
    a line saying it is still at work (a deploy takes a minute, a drill up to 40 s)."""

    def __init__(self) -> None:
        import threading

        self.started = time.monotonic()
        self.step = "starting"
        self.last = self.started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def stamp(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        return f"[{elapsed // 60:2d}m{elapsed % 60:02d}s]"

    def say(self, text: str) -> None:
        for line in str(text).splitlines() or [""]:
            print(f"{self.stamp()} {line}" if line.strip() else line, flush=True)
        self.last = time.monotonic()

    def doing(self, step: str) -> None:
        self.step = step
        self.say(step)

    def _tick(self) -> None:
        while not self._stop.wait(5):
            if time.monotonic() - self.last >= 20:
                self.say(f"  ... still {self.step}")

    def close(self) -> None:
        self._stop.set()


def _check_selection(only: Sequence[str], job: str | None) -> None:
    """--only and --job are checked before anything starts (a typo would otherwise
    surface after a minute of deploying)."""
    from ..drill.drills import DRILLS, job_drills

    if job is not None:
        from handlers.jobs import JOBS  # the jobs this stack deploys

        known = sorted(j.name for j in JOBS)
        if job not in known:
            raise SystemExit(f"error: --job: {job!r} is not a job of this stack "
                             f"(jobs: {', '.join(known)})")
        names = [d.name for d in job_drills(job)]
    else:
        names = [d.name for d in DRILLS]
    unknown = sorted(set(only) - set(names))
    if unknown:
        import difflib

        hints = [m for u in unknown for m in difflib.get_close_matches(u, names, n=1)]
        raise SystemExit(f"error: --only: unknown drill {', '.join(unknown)} (drills: "
                         f"{', '.join(names)})"
                         + (f"; did you mean {', '.join(hints)}?" if hints else ""))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
EVERY_DRILL_PAGE = "drills.html"


def _file_part(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-.") or "-"


def drills_page_path(local: Path, *, only: Sequence[str], job: str | None) -> Path:
    """Where the demo writes its drills page: ``drills.html`` for every drill, else a
    page named after the selection (the job, then the drills, sorted), so that a
    selection never replaces the page of another.

    Example:
        >>> drills_page_path(Path(".local"), only=[], job="report-export").name
        'drills-report-export.html'
        >>> drills_page_path(Path(".local"), only=["lease-expiry", "crm-sync:overlap"],
        ...                  job=None).name
        'drills-crm-sync-overlap+lease-expiry.html'
    """
    drills = "+".join(sorted({_file_part(name) for name in only}))
    parts = [part for part in (_file_part(job) if job is not None else "", drills) if part]
    if not parts:
        return local / EVERY_DRILL_PAGE
    name = "-".join(parts)
    if len(name) > 120:  # a long list of drills: its start, and a digest of the whole
        import hashlib

        name = f"{name[:100]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
    return local / f"drills-{name}.html"


def page_lines(page: Path) -> list[str]:
    """What the demo prints last: the page it wrote, and, for a selection, that the
    page of every drill (another file) was left as it was."""
    lines = [f"drills page (every drill's checks and timeline): {page}",
             f"  open {page.resolve().as_uri()}"]
    if page.name != EVERY_DRILL_PAGE:
        every = page.with_name(EVERY_DRILL_PAGE)
        kept = (f"{every}, the page of every drill, is left as it was" if every.exists()
                else f"make demo with no DEMO_ARGS writes the page of every drill, {every}")
        lines[0] = f"drills page of this selection (its own file; {kept}): {page}"
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the drills' summary here")
    parser.add_argument("--only", action="append", metavar="NAME")
    parser.add_argument("--job", help="drill this job instead of the examples")
    parser.add_argument("--keep", action="store_true", help="leave the local AWS running")
    parser.add_argument("--stop", action="store_true",
                        help="stop the local AWS a --keep left running, and remove its files")
    args = parser.parse_args(argv)
    if args.stop:
        print(stop_kept(ROOT / ".local"))
        return 0
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # handlers.jobs: the deployment's job definitions
    _check_selection(args.only or (), args.job)
    import signal

    # A SIGTERM (a timeout, a CI runner stopping) unwinds like Ctrl-C: the local AWS
    # and its function workers are stopped and their temporary files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import boto3

    from ..deployment import Deployment
    from ..drill.report import render_table
    from ..drill.runner import connect, run_drills, summary
    from .deploy import DEFAULT_STACK, deploy, inspect_deployment

    local = ROOT / ".local"
    local.mkdir(exist_ok=True)
    started = time.monotonic()
    progress = _Progress()
    progress.doing("starting the local AWS (MiniStack)")
    aws = LocalStack.start(log_path=local / "ministack.log")
    try:
        progress.say(f"local AWS: MiniStack {VERSION} at {aws.endpoint} "
                     "(log: .local/ministack.log)")
        progress.doing("deploying the jobguard stack with the CDK CLI: bootstrap, then "
                       "deploy, about a minute each (log: .local/deploy.log)")
        outputs = deploy(aws.endpoint, log=local / "deploy.log", say=progress.say)
        session = boto3.session.Session(region_name=aws.env["AWS_REGION"],
                                        aws_access_key_id="test",
                                        aws_secret_access_key="test")
        # the jobs, their functions and queues, the recovery function: from the outputs
        deployment = Deployment.from_outputs(DEFAULT_STACK, outputs)
        progress.say("checked through the AWS APIs:")
        inspected = inspect_deployment(session, aws.endpoint, deployment)
        for what, ok in inspected:
            progress.say(f"  {'ok ' if ok else 'BAD'} {what}")
        stack = connect(stack=DEFAULT_STACK, endpoint=aws.endpoint, deployment=deployment)
        progress.step = "running the drills"

        def say(text: str) -> None:
            if text.strip().startswith("== "):
                progress.step = f"in drill {text.strip()[3:].split(':')[0]}"
            progress.say(text)

        results = run_drills(stack, only=args.only or (), job=args.job, say=say)
        progress.close()
        print("\n" + render_table(results))
        report = summary(results)
        report["deployment"] = [{"what": w, "ok": ok} for w, ok in inspected]
        report["seconds"] = round(time.monotonic() - started, 1)
        held = report["held"] and all(ok for _, ok in inspected)
        report["held"] = held
        page: Path | None = drills_page_path(local, only=args.only or (), job=args.job)
        assert page is not None
        try:
            from ..drill.runner import write_drills_page

            write_drills_page(stack, results, page)
            report["html"] = str(page)
        except Exception as exc:  # noqa: BLE001 - the drills' verdict stands without it
            progress.say(f"the drills page could not be written: {type(exc).__name__}: {exc}")
            page = None
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\n{'every drill held' if held else 'A DRILL FAILED'}: "
              f"{len(results)} drills, 0 duplicates allowed at any destination "
              f"({report['seconds']:.0f} s in all)")
        cli = _cli_path()
        if args.keep:
            pid = aws.process.pid if aws.process else "?"
            print(kept_lines(endpoint=aws.endpoint, table=outputs["TableName"],
                             stack=DEFAULT_STACK, pid=pid, workdir=aws.workdir, cli=cli))
            if aws.process is not None:
                _note_kept(local, pid=aws.process.pid, endpoint=aws.endpoint,
                           workdir=aws.workdir)
            aws.process = None  # not stopped below
            aws.workdir = None  # its workers still use it
        else:
            print(f"jobguard, the operator's command, is {cli} (or `. {Path(cli).parent}/activate`"
                  f" puts it on PATH); DEMO_ARGS=\"--keep\" leaves the local AWS running for it")
        if page is not None:  # last: the page's path is what the demo leaves behind
            print("\n".join(page_lines(page)))
        return 0 if held else 1
    finally:
        progress.close()
        aws.stop()


def kept_lines(*, endpoint: str, table: str, stack: str, pid: object, workdir: object,
               cli: str) -> str:
    """What ``--keep`` prints: the exports that point ``jobguard`` at the kept local AWS
    (its endpoint, fake credentials, the table, the stack, the example jobs), then commands
    that work as printed after them (``drill`` finds the stack in ``JOBGUARD_STACK``)."""
    return (f"local AWS left running at {endpoint} (pid {pid}). Point jobguard at "
            f"it, in this shell:\n"
            f"  export AWS_ENDPOINT_URL={endpoint} AWS_DEFAULT_REGION=us-east-1 "
            f"AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "
            f"JOBGUARD_TABLE={table} JOBGUARD_STACK={stack} "
            f"JOBGUARD_JOBS_MODULE=handlers.jobs\n"
            f"  {cli} status crm-sync; {cli} runs crm-sync; {cli} drill\n"
            f"  {cli} timeline crm-sync report-export --since 1h [--html timeline.html]\n"
            f"When done: make demo-stop (stops pid {pid}, removes {workdir})")


KEPT = "kept.json"
"""The note ``--keep`` leaves in ``.local``: the kept local AWS's pid, endpoint, folder."""


def _note_kept(local: Path, *, pid: int, endpoint: str, workdir: Path | None) -> None:
    _write_whole(local / KEPT, json.dumps({"pid": pid, "endpoint": endpoint,
                                           "workdir": str(workdir) if workdir else None}))


def _write_whole(path: Path, text: str) -> None:
    """``path`` holds ``text`` or what it held before, never a part: written to a file
    beside it, then renamed over it (a symlink there is replaced, never written through)."""
    import os
    import tempfile

    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def stop_kept(local: Path, *, wait_s: float = 10.0) -> str:
    """Stop the local AWS a ``--keep`` left running (its process group: MiniStack and its
    function workers), remove its temporary folder and the note; what was done, in one
    line. Nothing noted: said, nothing done. A pid that is no longer MiniStack's (it
    ended, and the number was reused, or the note was edited) is never signalled, and no
    folder but MiniStack's own (``jobguard-ministack-*``, a real folder of this user's) is
    removed."""
    import os
    import shutil
    import signal

    note = local / KEPT
    try:
        kept = json.loads(note.read_text())
        pid, endpoint, workdir = int(kept["pid"]), str(kept["endpoint"]), kept.get("workdir")
    except FileNotFoundError:
        return f"no local AWS kept ({note} does not exist): nothing to stop"
    except (ValueError, KeyError, TypeError) as exc:
        note.unlink()
        return f"{note} was not a kept local AWS's note ({exc}): removed it, stopped nothing"
    if _is_ours(pid, workdir):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        said = f"stopped the local AWS at {endpoint} (pid {pid} and its workers)"
    else:
        said = f"the local AWS at {endpoint} (pid {pid}) was no longer running"
    removed = [str(note)]
    if _ministack_folder(workdir, exists=True) is not None:
        shutil.rmtree(workdir, ignore_errors=True)
        removed.insert(0, workdir)
    note.unlink()
    return f"{said}; removed {', '.join(removed)}"


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie awaiting its parent."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        import os

        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _ministack_folder(workdir: object, *, exists: bool) -> Path | None:
    """The noted folder, when it can be MiniStack's own (``LocalStack.start`` makes it):
    an absolute path named ``jobguard-ministack-*``; with ``exists``, also a real folder
    (not a symlink) owned by this user. Else None: a note edited by hand, or another's."""
    import os
    import stat

    if not isinstance(workdir, str) or not workdir:
        return None
    path = Path(workdir)
    if not path.is_absolute() or not path.name.startswith(WORKDIR_PREFIX):
        return None
    if exists:
        try:
            found = path.lstat()
        except OSError:
            return None
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
            return None
    return path


def _is_ours(pid: int, workdir: str | None) -> bool:
    """``pid`` is still the kept MiniStack: alive, leading its own process group, and
    started with the environment the demo gave it (its TMPDIR the noted folder, which
    is named as MiniStack's are). A note without that folder names nothing of ours."""
    import os

    if _ministack_folder(workdir, exists=False) is None:
        return False
    if not _alive(pid):
        return False
    try:
        if os.getpgid(pid) != pid:
            return False
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as env:
            return f"TMPDIR={workdir}".encode() in env.read().split(b"\0")
    except OSError:  # no /proc (macOS): the group leader's id is the check
        return True


def _cli_path() -> str:
    """How to run ``jobguard`` from here: this interpreter's script, relative to the
    current folder when it is below it (``.venv/bin/jobguard`` after ``make demo``)."""
    script = Path(sys.executable).parent / "jobguard"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


if __name__ == "__main__":
    sys.exit(main())
