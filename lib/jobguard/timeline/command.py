"""``jobguard timeline``: the command's work once its options are checked (the CLI
module only parses and checks the job names)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import JobGuardError
from .collect import RunLogReader, collect
from .html import render_page
from .model import Timeline, Window
from .text import render_text

__all__ = ["TimelineOutput", "check_html_path", "timeline_command", "write_page"]


class TimelineOutput(ValueError):
    """A page that cannot be written where asked: ``field`` names the option."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def check_html_path(path: str) -> Path:
    """``--html FILE``: a file in an existing folder (checked before anything is read)."""
    target = Path(path).expanduser()
    if not path.strip():
        raise TimelineOutput("--html", "give a file name (e.g. timeline.html)")
    if target.is_dir():
        raise TimelineOutput("--html", f"{path!r} is a folder: give a file name in it "
                             "(e.g. timeline.html)")
    if not target.parent.is_dir():
        raise TimelineOutput("--html", f"{path!r}: no folder {str(target.parent)!r}")
    if not os.access(target.parent, os.W_OK):
        raise TimelineOutput("--html", f"{path!r}: folder {str(target.parent)!r} is not "
                             "writable")
    return target


def write_page(page: str, target: Path) -> Path:
    """Write the page whole or not at all (a temporary file renamed into place).

    Raises:
        JobGuardError: the page could not be written (the folder vanished, the disk is
            full): said with the path, and nothing is left half-written.
    """
    try:
        fd, temp = tempfile.mkstemp(prefix=".timeline-", suffix=".html", dir=target.parent)
    except OSError as exc:
        raise JobGuardError(f"timeline: could not write {target}: {exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.replace(temp, target)
    except BaseException as exc:
        Path(temp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise JobGuardError(f"timeline: could not write {target}: {exc}") from exc
        raise
    return target


def counts(timeline: Timeline) -> dict[str, Any]:
    return {"jobs": [lane.job for lane in timeline.lanes],
            "runs": sum(len(lane.bars) for lane in timeline.lanes),
            "not_run": sum(len(lane.marks) for lane in timeline.lanes),
            "markers": sum(len(lane.markers) for lane in timeline.lanes)}


def timeline_command(store: RunLogReader, jobs: Sequence[str], window: Window, *,
                     now_ms: int, html: Path | None, open_page: bool, output: str,
                     width: int, say: Callable[[str], None] = print,
                     opener: Callable[[str], bool] | None = None) -> int:
    """Read the jobs' run logs in ``window``, then print or write the timeline."""
    import json

    timeline = collect(store, jobs, window, now_ms=now_ms)
    if html is None and not open_page:
        if output == "json":
            say(json.dumps(timeline.as_dict(), indent=2))
        else:
            say(render_text(timeline, width=width))
        return 0
    if html is None:
        stamp = f"{now_ms // 1000}"
        html = Path(tempfile.gettempdir()) / f"jobguard-timeline-{stamp}.html"
    write_page(render_page(timeline), html)
    summary = {"html": str(html), **counts(timeline)}
    opened = None
    if open_page:
        import webbrowser

        opened = (opener or webbrowser.open)(html.resolve().as_uri())
        summary["opened"] = bool(opened)
    if output == "json":
        say(json.dumps(summary, indent=2))
    else:
        say(f"wrote {html}: {', '.join(summary['jobs'])}, {summary['runs']} runs, "
            f"{summary['not_run']} triggers not run, {summary['markers']} takeovers and "
            "force releases")
        if opened is False:
            say(f"no browser could be opened here: open {html.resolve().as_uri()}")
    return 0
