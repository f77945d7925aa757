"""Line charts drawn on the server as SVG: axes, units, a legend, and values on hover.

A chart needs no script and no network: the browser draws the SVG it is
sent, and each step's column carries a ``<title>`` with every series' value
there, which the browser shows on hover (and screen readers read). The page
puts the same numbers in a table beside each chart, for copying and for
browsers that show no SVG.

Everything written into the SVG is a number, a time or a label of ours; the
one label that comes from users (a queue's name, in the title) is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

__all__ = ["NO_VALUE", "Series", "line_chart", "nice_ceiling"]

NO_VALUE = "\u2013"
"""What a chart or table shows where there is no value (an en dash)."""

WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 26, 28
TICKS = 4


@dataclass(frozen=True)
class Series:
    """One line: its name, its CSS class (its colour) and a value per step (None: no value)."""

    name: str
    css: str
    values: Sequence[float | None]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** _floor_log10(value)
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= value:
            return factor * power
    raise AssertionError("unreachable: 10 times the power is above the value")


def _floor_log10(value: float) -> int:
    exponent = 0
    while 10.0**exponent > value:
        exponent -= 1
    while 10.0 ** (exponent + 1) <= value:
        exponent += 1
    return exponent


def line_chart(
    *,
    label: str,
    unit: str,
    steps: Sequence[datetime],
    series: Sequence[Series],
    fmt: Callable[[float], str],
    time_fmt: Callable[[datetime], str],
) -> str:
    """An SVG line chart of ``series`` over ``steps``; ``fmt`` writes a value with its unit.

    The y axis starts at 0 and rises in :data:`TICKS` round steps past the
    highest value, labelled with ``unit`` above it; the x axis labels five
    times, in UTC.
    """
    highest = max((v for s in series for v in s.values if v is not None), default=0)
    # A round step between the ticks, so every tick's label is a round number too.
    top = nice_ceiling(highest / TICKS) * TICKS
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = len(steps)
    step_w = plot_w / max(count - 1, 1)

    def x(i: int) -> float:
        return LEFT + i * step_w

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" preserveAspectRatio="xMidYMid meet">',
        f"<title>{escape(label)}</title>",
    ]
    for tick in range(TICKS + 1):
        value = top * tick / TICKS
        ty = y(value)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end">'
            f"{escape(fmt(value))}</text>"
        )
    parts.append(f'<text class="axis unit" x="4" y="14" text-anchor="start">{escape(unit)}</text>')
    if count:
        for tick in range(5):
            i = round(tick * (count - 1) / 4)
            anchor = "start" if tick == 0 else "end" if tick == 4 else "middle"
            parts.append(
                f'<text class="axis" x="{x(i):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
                f"{escape(time_fmt(steps[i]))}</text>"
            )
    for s in series:
        parts.append(_polyline(s, x, y))
    # A column per step, as wide as a step, whose title holds every value there.
    for i, at in enumerate(steps):
        values = ", ".join(
            f"{s.name} {fmt(v) if (v := s.values[i]) is not None else NO_VALUE}" for s in series
        )
        parts.append(
            f'<rect class="hover" x="{x(i) - step_w / 2:.1f}" y="{TOP}" '
            f'width="{step_w:.1f}" height="{plot_h}">'
            f"<title>{escape(time_fmt(at))} UTC: {escape(values)}</title></rect>"
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="legend {escape(s.css)}">{escape(s.name)}</span>' for s in series
    )
    return f'<figure class="chart-box">{"".join(parts)}<figcaption>{legend}</figcaption></figure>'


def _polyline(s: Series, x: Callable[[int], float], y: Callable[[float], float]) -> str:
    """The series as polylines, broken where a step has no value."""
    runs: list[list[str]] = [[]]
    for i, v in enumerate(s.values):
        if v is None:
            runs.append([])
        else:
            runs[-1].append(f"{x(i):.1f},{y(v):.1f}")
    lines = [
        f'<polyline class="line {escape(s.css)}" points="{" ".join(run)}"/>'
        for run in runs
        if len(run) > 1
    ]
    dots = [
        f'<circle class="dot {escape(s.css)}" cx="{run[0].split(",")[0]}" '
        f'cy="{run[0].split(",")[1]}" r="2"/>'
        for run in runs
        if len(run) == 1
    ]
    return "".join(lines + dots)
