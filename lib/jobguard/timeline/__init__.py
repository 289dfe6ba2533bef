"""``jobguard timeline``: what happened to a job's triggers, drawn on a time axis.

Operator tooling, like the CLI: no Lambda function imports it and the production code
asset does not carry it. :mod:`.model` decides what is shown from run records (pure),
:mod:`.html` draws it as a self-contained page (its chart :mod:`.chart`, its tables
:mod:`._table`), :mod:`.text` for a terminal, :mod:`.collect` reads it from a job store,
:mod:`.window` checks the time range.

Example:
    >>> from jobguard.timeline import Window, build_timeline, render_page
    >>> page = render_page(build_timeline([("crm-sync", [])], Window(0, 60_000),
    ...                                   now_ms=60_000))
    >>> page.startswith("<!doctype html>")
    True
"""

from .collect import RunLogReader, collect
from .html import DrillSection, render_drills_page, render_page, render_svg
from .model import Bar, Lane, Mark, Marker, Timeline, Window, build_lane, build_timeline
from .text import render_text
from .window import WindowError, parse_duration, window_from_options

__all__ = ["Bar", "DrillSection", "Lane", "Mark", "Marker", "RunLogReader", "Timeline",
           "Window", "WindowError", "build_lane", "build_timeline", "collect",
           "parse_duration", "render_drills_page", "render_page", "render_svg",
           "render_text", "window_from_options"]
