"""``jobguard timeline``: the command's work once its options are checked (the CLI
module only parses and checks the job names)."""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import JobGuardError
from .collect import RunLogReader, collect
from .html import render_page
from .model import Timeline, Window
from .text import render_text

__all__ = ["TimelineOutput", "check_html_path", "timeline_command", "write_page",
           "write_private_page"]


class TimelineOutput(ValueError):
    """A page that cannot be written where asked: ``field`` names the option."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _what(mode: int) -> str:
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def check_html_path(path: str) -> Path:
    """``--html FILE``: a regular file, new or replaced whole, in a folder this process
    can create files in (checked before anything is read, by creating and removing one).

    Anything else the name already is (a folder, a symbolic link, a FIFO, a device, a
    socket) is refused: the page is never swapped in for it, nor written through it.
    """
    target = Path(path).expanduser()
    if not path.strip():
        raise TimelineOutput("--html", "give a file name (e.g. timeline.html)")
    try:
        mode: int | None = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise TimelineOutput("--html", f"{path!r}: {exc.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise TimelineOutput("--html", f"{path!r} is a folder: give a file name in it "
                             "(e.g. timeline.html)")
    if mode is not None and not stat.S_ISREG(mode):
        raise TimelineOutput("--html", f"{path!r} is {_what(mode)}: the page is written "
                             "only to a regular file (a new one, or one it replaces whole); "
                             "write it to a file, then copy or send that")
    if not target.parent.is_dir():
        raise TimelineOutput("--html", f"{path!r}: no folder {str(target.parent)!r}")
    try:  # os.access says yes to root on a read-only mount: try it for real
        fd, probe = tempfile.mkstemp(prefix=".timeline-probe-", dir=target.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise TimelineOutput("--html", f"{path!r}: no file can be written in folder "
                             f"{str(target.parent)!r} ({exc.strerror})") from None
    return target


def write_page(page: str, target: Path) -> Path:
    """Write the page whole or not at all: a temporary file beside ``target``, renamed
    over it. A new page gets the permissions the umask gives any new file; a page
    written again keeps the ones its file had.

    Raises:
        JobGuardError: the page could not be written (the folder vanished, the disk is
            full, the name became something other than a regular file since it was
            checked): said with the path, and nothing is left half-written.
    """
    def failed(why: object) -> JobGuardError:
        return JobGuardError(f"timeline: could not write {target}: {why}")

    def regular_mode() -> int | None:
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise failed(exc) from exc
        if not stat.S_ISREG(mode):
            raise failed(f"it is {_what(mode)} now, not a regular file: left as it is")
        return stat.S_IMODE(mode)

    kept = regular_mode()
    temp = target.parent / f".timeline-{secrets.token_hex(6)}.html"
    try:  # 0o666 less the umask, as for any file the operator's shell creates
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise failed(exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            if kept is not None:
                os.fchmod(out.fileno(), kept)
            out.write(page)
        regular_mode()  # not swapped for a pipe or a link in the meantime
        os.replace(temp, target)
    except BaseException as exc:
        temp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise failed(exc) from exc
        raise
    return target


def write_private_page(page: str, *, prefix: str = "jobguard-") -> Path:
    """Write the page to a new file in the temporary folder, readable and writable by
    this user only (0600, whatever the umask): the folder is shared (``/tmp``), and a
    page holds the run log's text. The name is a new one no one made first
    (``tempfile.mkstemp``: created exclusively, never through a link).

    Raises:
        JobGuardError: the page could not be written (the disk is full): said with the
            path, and the file is removed.
    """
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".html")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
    except BaseException as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise JobGuardError(f"timeline: could not write {path}: {exc}") from exc
        raise
    return path


def counts(timeline: Timeline) -> dict[str, Any]:
    return {"jobs": [lane.job for lane in timeline.lanes],
            "runs": sum(len(lane.bars) for lane in timeline.lanes),
            "not_run": sum(len(lane.marks) for lane in timeline.lanes),
            "markers": sum(len(lane.markers) for lane in timeline.lanes)}


def timeline_command(store: RunLogReader, jobs: Sequence[str], window: Window, *,
                     now_ms: int, html: Path | None, open_page: bool, output: str,
                     width: int, say: Callable[[str], None] = print,
                     opener: Callable[[str], bool] | None = None, zoom: bool = True) -> int:
    """Read the jobs' run logs in ``window``, then print or write the timeline
    (``zoom=False``: its chart over the whole window, never only where the runs are)."""
    import json

    timeline = collect(store, jobs, window, now_ms=now_ms)
    if html is None and not open_page:
        if output == "json":
            say(json.dumps(timeline.as_dict(), indent=2))
        else:
            say(render_text(timeline, width=width, zoom=zoom))
        return 0
    if html is None:  # --open alone: a private file in the shared temporary folder
        html = write_private_page(render_page(timeline, zoom=zoom),
                                  prefix=f"jobguard-timeline-{now_ms // 1000}-")
    else:  # --html FILE: the operator's own file, made as their shell makes one
        write_page(render_page(timeline, zoom=zoom), html)
    summary = {"html": str(html), **counts(timeline)}
    opened = None
    if open_page:
        import webbrowser

        opened = (opener or webbrowser.open)(html.resolve().as_uri())
        summary["opened"] = bool(opened)
    if output == "json":
        say(json.dumps(summary, indent=2))
    else:
        markers = summary["markers"]
        say(f"wrote {html}: {', '.join(summary['jobs'])}, {summary['runs']} runs, "
            f"{summary['not_run']} triggers not run, {markers} "
            f"{'takeover or force release' if markers == 1 else 'takeovers and force releases'}")
        if opened is False:
            say(f"no browser could be opened here: open {html.resolve().as_uri()}")
    return 0
