"""``jobrun demo``: an application built on jobrun, showing every part working together.

It lives in its own package, like a user's service would: its fixture table,
queries and generated query layer (:mod:`jobrun.demo.sqlc`) are its own, and
it starts jobrun through :class:`~jobrun.client.Client` like any embedder.
"""

from jobrun.demo.run import WORKER_CONCURRENCY, build_registry, percentile, plan_jobs, run_demo

__all__ = ["WORKER_CONCURRENCY", "build_registry", "percentile", "plan_jobs", "run_demo"]
