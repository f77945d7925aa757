"""The worker: claims jobs, runs their handlers, and reports every outcome.

A package of services, each in a room of its own, composed by :class:`Worker`
(:mod:`jobrun.worker.worker`): the claimer over the pure claim arithmetic
(:mod:`jobrun.worker.claiming`), the executor (shared with
:func:`jobrun.testing.run_job`), the runner, reporter and completer, the
heartbeat, handoff and shutdown. The services never import one another; an
import-linter contract keeps it so.
"""

from jobrun.worker.worker import (
    DEFAULT_CLAIM_AHEAD,
    Completer,
    CompletionStats,
    Worker,
    default_owner,
)

__all__ = ["DEFAULT_CLAIM_AHEAD", "Completer", "CompletionStats", "Worker", "default_owner"]
