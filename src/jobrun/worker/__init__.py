"""The worker: claims jobs, runs their handlers, and reports every outcome.

A package of services, each in a room of its own, composed by :class:`Worker`
(:mod:`jobrun.worker.worker`).
"""

from jobrun.worker.worker import (
    DEFAULT_CLAIM_AHEAD,
    Completer,
    CompletionStats,
    Worker,
    default_owner,
)

__all__ = ["DEFAULT_CLAIM_AHEAD", "Completer", "CompletionStats", "Worker", "default_owner"]
