"""The Charts page and ``/api/stats``: throughput, failure rate, queue wait and run time.

Both read the rows the maintenance leader rolls up (:mod:`jobrun.rollup`)
through :func:`jobrun.web.stats_view.stats_view`, for the last hour, day or
week (``?window=``), of one queue or all (``?queue=``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobrun.domain import StatsWindow
from jobrun.web import formatting
from jobrun.web.charts import NO_VALUE, Series, line_chart
from jobrun.web.dashboard import Dashboard
from jobrun.web.pages import render
from jobrun.web.stats_view import PERCENTILES, StatsView, stats_view

__all__ = ["stats_api", "stats_page"]

_STEP_NAMES = {
    StatsWindow.HOUR: "minute",
    StatsWindow.DAY: "10 minutes",
    StatsWindow.WEEK: "hour",
}


class _BadQuery(ValueError):
    pass


def _query(request: Request) -> tuple[StatsWindow, str | None]:
    params = request.query_params
    window = params.get("window") or StatsWindow.HOUR.value
    try:
        chosen = StatsWindow(window)
    except ValueError:
        choices = ", ".join(w.value for w in StatsWindow)
        raise _BadQuery(f"window must be one of {choices}, got {window!r}") from None
    return chosen, params.get("queue") or None


async def _view(dash: Dashboard, window: StatsWindow, queue: str | None) -> StatsView:
    store = await dash.reader()
    return await stats_view(store, await store.now(), window, queue)


async def stats_api(dash: Dashboard, request: Request) -> Response:
    """The window's points and totals as JSON (see :meth:`StatsView.as_json`)."""
    try:
        window, queue = _query(request)
    except _BadQuery as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse((await _view(dash, window, queue)).as_json())


async def stats_page(dash: Dashboard, request: Request) -> Response:
    """The Charts page."""
    try:
        window, queue = _query(request)
    except _BadQuery as exc:
        return render(dash, request, "error.html", 400, message=str(exc))
    view = await _view(dash, window, queue)
    # The queues with something to chart in the window (and the one asked for).
    queues = sorted({row.queue for row in view.by_type} | ({queue} if queue else set()))
    return render(
        dash,
        request,
        "stats.html",
        view=view,
        windows=list(StatsWindow),
        queues=queues,
        step_name=_STEP_NAMES[window],
        charts=_charts(view),
        percentiles=PERCENTILES,
        seconds=_seconds,
    )


def _charts(view: StatsView) -> dict[str, str]:
    step_name = _STEP_NAMES[view.window]

    def time_label(at: datetime) -> str:
        return at.strftime("%H:%M" if view.window is StatsWindow.HOUR else "%a %H:%M")

    outcomes = view.points
    durations = {
        f"{which} p{p}": view.percentile_series(which, p)
        for which in ("wait", "run")
        for p in (50, 95)
    }
    return {
        "throughput": line_chart(
            label=f"attempts ended per {step_name}",
            unit=f"per {step_name}",
            steps=view.steps,
            series=[
                Series("succeeded", "c-succeeded", [p.outcomes.succeeded for p in outcomes]),
                Series("failed", "c-failed", [p.outcomes.failed for p in outcomes]),
                Series("dead", "c-dead", [p.outcomes.dead for p in outcomes]),
            ],
            fmt=lambda v: f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.1f}",
            time_fmt=time_label,
        ),
        "failure_rate": line_chart(
            label=f"share of attempts that failed, per {step_name}",
            unit="% failed",
            steps=view.steps,
            series=[Series("failed or dead", "c-dead", view.failure_rates())],
            fmt=lambda v: f"{v:.0f}%" if v >= 10 or v == 0 else f"{v:.1f}%",
            time_fmt=time_label,
        ),
        "wait": line_chart(
            label="queue wait of the attempts that ended a job, 50th and 95th percentiles",
            unit="queue wait",
            steps=view.steps,
            series=[
                Series("p50", "c-p50", durations["wait p50"]),
                Series("p95", "c-p95", durations["wait p95"]),
            ],
            fmt=_seconds,
            time_fmt=time_label,
        ),
        "run": line_chart(
            label="run time of the attempts that ended a job, 50th and 95th percentiles",
            unit="run time",
            steps=view.steps,
            series=[
                Series("p50", "c-p50", durations["run p50"]),
                Series("p95", "c-p95", durations["run p95"]),
            ],
            fmt=_seconds,
            time_fmt=time_label,
        ),
    }


def _seconds(value: float | timedelta | None) -> str:
    """A duration in the dashboard's one format (:func:`jobrun.web.formatting.duration`),
    or a dash for none."""
    if value is None:
        return NO_VALUE
    return formatting.duration(value)
