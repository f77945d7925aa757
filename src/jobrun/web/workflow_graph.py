"""A workflow drawn as a graph: where each step's box goes, computed on the server.

Left to right by level (:meth:`jobrun.domain.Workflow.levels`), top to
bottom in enqueue order, so the page is plain SVG: no script, no layout
library, nothing from the network. A level with more steps than
:data:`MAX_DRAWN_PER_LEVEL` draws that many and one box for the rest,
counting their states, so a fan-out of 1,000 parts stays a page tall.
Every step is still listed in the table below the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from jobrun.domain import Workflow, WorkflowStep

__all__ = ["MAX_DRAWN_PER_LEVEL", "Box", "GraphLayout", "Line", "layout"]

MAX_DRAWN_PER_LEVEL = 12
"""The most steps drawn in one level; the rest share one box."""

BOX_WIDTH, BOX_HEIGHT = 190, 44
COLUMN_GAP, ROW_GAP, MARGIN = 70, 14, 10


@dataclass(frozen=True, slots=True)
class Box:
    """One box: a step (``step`` set) or the rest of a level (``rest`` counts its states)."""

    x: int
    y: int
    step: WorkflowStep | None
    rest: dict[str, int] | None = None

    @property
    def state(self) -> str:
        """The state its colour shows: the step's, or ``"many"`` for the rest of a level."""
        if self.step is None:
            return "many"
        return "purged" if self.step.state is None else self.step.state.value


@dataclass(frozen=True, slots=True)
class Line:
    """An edge from the right side of one box to the left side of another."""

    x1: int
    y1: int
    x2: int
    y2: int
    if_failed: str


@dataclass(frozen=True, slots=True)
class GraphLayout:
    """The boxes and lines of a workflow's drawing, and the drawing's size."""

    width: int
    height: int
    boxes: tuple[Box, ...]
    lines: tuple[Line, ...]


def layout(workflow: Workflow) -> GraphLayout:
    """Where each step's box and each dependency's line goes."""
    boxes: list[Box] = []
    where: dict[UUID, Box] = {}
    tallest = 0
    levels = workflow.levels()
    for column, level in enumerate(levels):
        x = MARGIN + column * (BOX_WIDTH + COLUMN_GAP)
        drawn = level if len(level) <= MAX_DRAWN_PER_LEVEL else level[: MAX_DRAWN_PER_LEVEL - 1]
        for row, step in enumerate(drawn):
            box = Box(x=x, y=MARGIN + row * (BOX_HEIGHT + ROW_GAP), step=step)
            boxes.append(box)
            where[step.job_id] = box
        rest = level[len(drawn) :]
        if rest:
            counts: dict[str, int] = {}
            for step in rest:
                key = "purged" if step.state is None else step.state.value
                counts[key] = counts.get(key, 0) + 1
            box = Box(x=x, y=MARGIN + len(drawn) * (BOX_HEIGHT + ROW_GAP), step=None, rest=counts)
            boxes.append(box)
            for step in rest:
                where[step.job_id] = box
        tallest = max(tallest, len(drawn) + (1 if rest else 0))
    seen: set[tuple[int, int, int, int]] = set()
    lines: list[Line] = []
    for edge in workflow.edges:
        start, end = where.get(edge.depends_on), where.get(edge.job_id)
        if start is None or end is None:
            continue
        drawn_at = (start.x, start.y, end.x, end.y)
        if drawn_at in seen:  # many steps folded into one box draw one line
            continue
        seen.add(drawn_at)
        lines.append(
            Line(
                x1=start.x + BOX_WIDTH,
                y1=start.y + BOX_HEIGHT // 2,
                x2=end.x,
                y2=end.y + BOX_HEIGHT // 2,
                if_failed=edge.if_failed,
            )
        )
    width = 2 * MARGIN + max(1, len(levels)) * (BOX_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = 2 * MARGIN + max(1, tallest) * (BOX_HEIGHT + ROW_GAP) - ROW_GAP
    return GraphLayout(width=width, height=height, boxes=tuple(boxes), lines=tuple(lines))
