"""Where the page's shapes go (private): the time axis's geometry, the shapes a lane's
runs become, and the levels its marks stack on. Pure, and linear in the records.

In a lane of a few records each run is a bar and each trigger not run a mark. A dense
lane (more than :data:`DENSE_AT` records) would be thousands of shapes closer than a
pixel, a page of megabytes, drawn as a smear: there each row is drawn pixel column by
pixel column. A column whose runs share one status joins its neighbours of that status
in one bar; a column of mixed statuses is split top to bottom in proportion to how many
runs of each it holds (each at least :data:`MIN_STRIP_PX` high, so a lone failure is
seen, never larger than its share). The chart then has at most a few shapes per pixel
whatever the number of records, and a mostly healthy job reads mostly healthy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import RUN_STATUSES, Bar, Lane, Mark

__all__ = ["BAR_H", "DENSE_AT", "MARK_LEVELS", "MARK_PX", "MARK_STEP", "MERGE_PX",
           "MIN_STRIP_PX", "PAD", "PLOT_W", "WIDE_PX", "WIDTH", "Geometry", "MarkSpot",
           "Shape", "dense", "place_marks", "shapes"]

WIDTH = 1200
PAD = 14
PLOT_W = WIDTH - 2 * PAD
BAR_H = 16

DENSE_AT = 1500
"""A lane with more records than this is dense (see the module's text)."""
MERGE_PX = 1.0
"""A dense lane's column width, and the most space between runs drawn as one bar."""
WIDE_PX = 3.0
"""In a dense lane, a run at least this wide is drawn as itself."""
MIN_STRIP_PX = 2.0
MARK_PX = 6.0
"""In a dense lane, triggers of one decision within this of each other are one mark."""
MARK_LEVELS = 4
"""Marks closer than a mark's width stack upwards, at most this many high; more than
that at one place are one mark on the top level saying how many it stands for."""
MARK_STEP = 13
MARK_CLEAR_PX = 12.0
_ORDER = {status: n for n, status in enumerate(RUN_STATUSES)}


@dataclass(frozen=True)
class Geometry:
    """The window's time axis on the page's plot."""

    from_ms: int
    span_ms: int

    def x(self, ms: int) -> float:
        ms = min(max(ms, self.from_ms), self.from_ms + self.span_ms)
        return round(PAD + (ms - self.from_ms) / self.span_ms * PLOT_W, 1)


@dataclass(frozen=True)
class Shape:
    """Runs drawn as one rectangle: ``top`` and ``height`` within the bar's height
    (0 and :data:`BAR_H` for a whole bar; less for a share of a mixed column)."""

    bars: tuple[Bar, ...]
    x0: float
    x1: float
    top: float = 0.0
    height: float = BAR_H
    end_ms: int = 0
    """The latest end of its runs."""
    share_of: int = 0
    """A mixed column's share: how many runs the whole column holds (0: a bar)."""

    @property
    def status(self) -> str:
        return self.bars[0].status


@dataclass(frozen=True)
class MarkSpot:
    """Triggers not run drawn as one mark, at ``level`` above the lane's mark row."""

    marks: tuple[Mark, ...]
    x: float
    level: int


def dense(lane: Lane) -> bool:
    return len(lane.bars) + len(lane.marks) > DENSE_AT


class _Stretch:
    """Runs of one status, one after the other on a row, growing into one bar."""

    def __init__(self) -> None:
        self.bars: list[Bar] = []
        self.x0 = self.x1 = 0.0
        self.end_ms = 0

    def add(self, column: Sequence[tuple[Bar, float, float, int]]) -> None:
        if not self.bars:
            self.x0, self.x1, self.end_ms = column[0][1], column[0][2], column[0][3]
        for bar, _, x1, end in column:
            self.bars.append(bar)
            self.x1, self.end_ms = max(self.x1, x1), max(self.end_ms, end)

    def close(self, out: list[Shape]) -> None:
        if self.bars:
            out.append(Shape(tuple(self.bars), self.x0, self.x1, end_ms=self.end_ms))
            self.bars = []


def shapes(lane: Lane, g: Geometry) -> list[Shape]:
    """The rectangles a lane's runs are drawn as, in time order on each row (each run's
    times read once: linear in the runs)."""
    if not dense(lane):
        return [Shape((bar,), g.x(bar.start_ms), g.x(bar.end_ms), end_ms=bar.end_ms)
                for bar in lane.bars]
    out: list[Shape] = []
    stretch = _Stretch()
    column: list[tuple[Bar, float, float, int]] = []  # (bar, x0, x1, end_ms)
    at = row = -1  # the column being filled, on this row

    def close_column() -> None:
        if not column:
            return
        status = column[0][0].status
        if all(bar.status == status for bar, _, _, _ in column):
            if stretch.bars and (stretch.bars[0].status != status
                                 or column[0][1] - stretch.x1 > MERGE_PX):
                stretch.close(out)
            stretch.add(column)
        else:
            stretch.close(out)
            out.extend(_split(column, at))
        column.clear()

    for bar in sorted(lane.bars, key=lambda b: (b.row, b.start_ms)):
        end = bar.end_ms
        x0, x1 = g.x(bar.start_ms), g.x(end)
        if bar.row != row:
            close_column()
            stretch.close(out)
            row, at = bar.row, -1
        if x1 - x0 >= WIDE_PX or bar.open_end or bar.displaced_run_id \
                or bar.held_to_ms is not None:
            close_column()
            stretch.close(out)
            out.append(Shape((bar,), x0, x1, end_ms=end))
            at = -1
            continue
        index = int((x0 - PAD) // MERGE_PX)
        if index != at:
            close_column()
            at = index
        column.append((bar, x0, x1, end))
    close_column()
    stretch.close(out)
    return out


def _split(column: Sequence[tuple[Bar, float, float, int]], index: int) -> list[Shape]:
    """A column of mixed statuses (pixel column ``index``), one share per status, top to
    bottom in the legend's order, each as high as its share of the column's runs (at
    least :data:`MIN_STRIP_PX`; the largest share gives way), as wide as the pixel (so
    that mixed columns side by side tile, with no seam between them)."""
    by_status: dict[str, list[Bar]] = {}
    for bar, _, _, _ in column:
        by_status.setdefault(bar.status, []).append(bar)
    ordered = sorted(by_status.items(), key=lambda kv: (_ORDER.get(kv[0], len(_ORDER)),
                                                        kv[0]))
    total = len(column)
    heights = [max(MIN_STRIP_PX, BAR_H * len(bars) / total) for _, bars in ordered]
    largest = max(range(len(heights)), key=lambda i: heights[i])
    heights[largest] -= sum(heights) - BAR_H
    x0 = round(PAD + index * MERGE_PX, 1)
    x1 = round(x0 + MERGE_PX, 1)
    end = max(e for *_, e in column)
    out, top = [], 0.0
    for (_, bars), height in zip(ordered, heights, strict=True):
        out.append(Shape(tuple(bars), x0, x1, round(top, 2), round(height, 2), end_ms=end,
                         share_of=total))
        top += height
    return out


def place_marks(lane: Lane, g: Geometry) -> list[MarkSpot]:
    """Where a lane's marks go: one per trigger (in a dense lane, one per decision
    within :data:`MARK_PX`), each on the lowest level clear of the last mark there;
    past :data:`MARK_LEVELS` they join the mark on the top level (it says how many)."""
    groups: list[list[Mark]] = []
    if dense(lane):
        open_: dict[str, list[Mark]] = {}
        for mark in lane.marks:  # in time order
            group = open_.get(mark.decision)
            if group is not None and g.x(mark.at_ms) - g.x(group[0].at_ms) <= MARK_PX:
                group.append(mark)
            else:
                open_[mark.decision] = [mark]
                groups.append(open_[mark.decision])
    else:
        groups = [[mark] for mark in lane.marks]
    spots: list[list[Mark]] = []
    xs: list[float] = []
    levels: list[int] = []
    last: list[int] = []  # per level, the spot last put there
    for group in groups:
        x = g.x(group[0].at_ms)
        level = next((n for n, spot in enumerate(last) if x - xs[spot] >= MARK_CLEAR_PX),
                     None)
        if level is None and len(last) == MARK_LEVELS:
            spots[last[-1]].extend(group)  # no room: one mark says how many
            continue
        if level is None:
            level = len(last)
            last.append(len(spots))
        else:
            last[level] = len(spots)
        spots.append(group)
        xs.append(x)
        levels.append(level)
    return [MarkSpot(tuple(s), x, level) for s, x, level in zip(spots, xs, levels,
                                                                strict=True)]
