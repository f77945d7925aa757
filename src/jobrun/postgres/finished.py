"""Hear, over LISTEN/NOTIFY, that a job finished: what :meth:`jobrun.Client.result` waits on.

``JobRecordOutcomes`` notifies the channel 'jobrun.finished'
(:data:`~jobrun.domain.FINISHED_CHANNEL`) with a job's id when it stores the
job's result or leaves the job dead or cancelled, at the completion's commit.
:class:`FinishWatcher` is a :class:`~jobrun.postgres.notify.Notifier` that
LISTENs on that channel alone (a worker's notifier does not, so workers are
not sent every finished job of the fleet) and wakes the waiters of that id.
It inherits the notifier's reconnection: after a drop it wakes every waiter
once, since a notification may have been lost, and the waiter reads again.

The channel is one for every jobrun installation on the server, whatever
their ``notify_channel``: ids are unique, so another installation's
notification wakes nobody here.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from jobrun.domain import FINISHED_CHANNEL, parse_job_id
from jobrun.postgres.notify import DEFAULT_CHANNEL, Notifier, Subscription

__all__ = ["FinishWatcher"]


class FinishWatcher(Notifier):
    """Wakes waiters on the ids of jobs that finished with a result, dead or cancelled.

    ``await FinishWatcher.start(url)``, then :meth:`watch` a job id before
    reading the job's state, so a notification sent between the read and the
    wait is not missed.
    """

    def __init__(self, url: str, **options: Any) -> None:
        options.setdefault("application_name", "jobrun-results")
        super().__init__(url, DEFAULT_CHANNEL, **options)

    @classmethod
    async def start(cls, url: str, channel: str = DEFAULT_CHANNEL, **options: Any) -> FinishWatcher:
        """Connect, LISTEN on the finished channel and start dispatching."""
        watcher = cls(url, **options)
        await watcher.open()
        return watcher

    def watch(self, job_id: UUID | str) -> Subscription:
        """A one-slot signal set when ``job_id`` is announced finished; close it when done."""
        return self.subscribe((str(parse_job_id(job_id)),))

    def _listened(self) -> tuple[str, ...]:
        return (FINISHED_CHANNEL,)

    def _dispatch_note(self, channel: str, payload: str) -> None:
        if channel == FINISHED_CHANNEL:
            self._dispatch(payload)
