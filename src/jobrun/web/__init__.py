"""jobrun's web dashboard: an ASGI app to watch and steer queues, jobs and schedules.

Install the ``web`` extra (``pip install 'jobrun[web]'``) and either run
``jobrun web`` or mount :func:`create_app` in your own ASGI application. The
dashboard talks to jobrun only through its ports (:class:`~jobrun.ports.Admin`
and :class:`~jobrun.ports.ScheduleStore`), so it holds no SQL of its own.
"""

from __future__ import annotations

from jobrun.web.app import create_app
from jobrun.web.dashboard import WebStore

__all__ = ["WebStore", "create_app"]
