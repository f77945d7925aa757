"""Test signals: what a worker did, for a test to wait on instead of sleeping.

A test that sleeps "long enough" for the worker to have claimed, gone idle
or recorded an outcome is slow on a fast machine and flaky on a slow one.
The worker's services emit a :class:`Signal` at each of those moments
instead (River's ``testsignal`` does the same), and a test awaits it.

Signals cost nothing until a test turns them on: :meth:`WorkerSignals.init`
(or :meth:`Signal.init`) starts keeping what is emitted; before that,
:meth:`Signal.emit` only checks one attribute. A production worker never
keeps anything, so nothing grows while it runs.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from jobrun.domain import Job, Outcome
from jobrun.errors import UsageError

__all__ = ["DEFAULT_WITHIN", "Signal", "WorkerSignals"]

T = TypeVar("T")

DEFAULT_WITHIN = 10.0
"""Seconds :meth:`Signal.wait` waits by default: generous, since only failures wait it."""


class Signal(Generic[T]):
    """One kind of moment a test can wait for; the values emitted queue up in order."""

    __slots__ = ("_arrived", "_values", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        """What the signal tells of, for failure messages."""
        self._values: collections.deque[T] | None = None
        self._arrived: asyncio.Event | None = None

    def init(self) -> None:
        """Start keeping emitted values (a test calls it before the worker runs)."""
        self._values = collections.deque()
        self._arrived = asyncio.Event()

    @property
    def on(self) -> bool:
        """Whether values are kept: for an emitter whose value costs something to build."""
        return self._values is not None

    def emit(self, value: T) -> None:
        """Record ``value`` for a waiting test; does nothing unless :meth:`init` was called."""
        if self._values is not None:
            self._values.append(value)
            assert self._arrived is not None
            self._arrived.set()

    async def wait(self, *, within: float = DEFAULT_WITHIN) -> T:
        """The oldest value not taken yet, waiting up to ``within`` seconds for one.

        Raises AssertionError naming the signal when nothing comes in time.
        """
        return await self.wait_for(lambda _: True, within=within)

    async def wait_for(self, accept: Callable[[T], object], *, within: float = DEFAULT_WITHIN) -> T:
        """Take values in order until one that ``accept`` returns true for; return it."""
        if self._values is None or self._arrived is None:
            raise UsageError(f"signal {self.name!r} was not initialised (call init() first)")
        try:
            async with asyncio.timeout(within):
                while True:
                    while self._values:
                        value = self._values.popleft()
                        if accept(value):
                            return value
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            raise AssertionError(
                f"signal {self.name!r}: nothing accepted within {within}s"
            ) from None


class WorkerSignals:
    """The moments a :class:`~jobrun.worker.Worker` signals, all off until :meth:`init`."""

    __slots__ = ("claimed", "draining", "idle", "recorded", "stopping")

    def __init__(self) -> None:
        self.claimed: Signal[Sequence[Job]] = Signal("claimed")
        """After each claim, once its jobs were started or buffered: the jobs it returned."""
        self.idle: Signal[str] = Signal("idle")
        """The claim loop starts waiting: for ``"notification"`` (the dispatcher, or
        ``poll_every`` without one), ``"retry"`` (after a failed claim) or ``"slot"``
        (every slot taken, or a drain waiting for running jobs)."""
        self.recorded: Signal[Sequence[tuple[Outcome, Job | BaseException]]] = Signal("recorded")
        """After each completion batch: every outcome in it with its result."""
        self.stopping: Signal[bool] = Signal("stopping")
        """A stop was requested (``True`` when graceful)."""
        self.draining: Signal[int] = Signal("draining")
        """The claim loop has ended and the grace period begins: how many jobs it waits for."""

    def init(self) -> None:
        """Turn every signal on."""
        for signal in (self.claimed, self.idle, self.recorded, self.stopping, self.draining):
            signal.init()
