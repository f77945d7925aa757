"""The ports that wake idle workers: what LISTEN/NOTIFY gives the runtime.

:class:`Dispatcher` wakes workers when jobs are enqueued (polling is the
guarantee); a :class:`HandoffReceiver` also delivers, to a :class:`HandoffInbox`,
jobs an enqueue leased straight to an idle worker. Re-exported by
:mod:`jobrun.ports`, beside the storage ports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from jobrun.domain import Job

__all__ = ["Dispatcher", "HandoffInbox", "HandoffReceiver"]


@runtime_checkable
class Dispatcher(Protocol):
    """Wakes waiting workers when jobs are enqueued; a latency optimisation only."""

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> bool:  # noqa: ASYNC109
        """Wait until one of ``queues`` is notified or ``timeout`` passes.

        Returns True when woken by a notification. Notifications that arrive
        while nobody waits are coalesced into one pending wake-up.
        """
        ...


@runtime_checkable
class HandoffReceiver(Protocol):
    """A dispatcher that can also deliver jobs handed to one worker (see HandoffOffer).

    A worker whose dispatcher is one offers its free slots with its claims;
    an enqueue that takes an offer leases the job to the worker and sends it
    on the receiver's channel, and the receiver calls ``deliver`` with it.
    """

    def receive_handoffs(self, owner: str, deliver: Callable[[Job], None]) -> HandoffInbox:
        """Deliver the jobs handed to ``owner`` (a worker's lease owner) to ``deliver``."""
        ...


@runtime_checkable
class HandoffInbox(Protocol):
    """Where one worker's handed jobs arrive."""

    @property
    def channel(self) -> str:
        """The channel offers name, so that enqueues send handed jobs here."""
        ...

    @property
    def ready(self) -> bool:
        """Whether handed jobs can arrive now (the listening connection is up).

        A worker offers slots only while this holds: a job handed while the
        connection is down is not lost, but waits for its lease to expire.
        """
        ...

    def close(self) -> None:
        """Stop receiving handed jobs."""
        ...
