"""A thread pool of daemon threads, for sync handlers the worker may have to leave behind.

A thread cannot be interrupted. When a sync handler ignores its cancellation
token past the shutdown deadline, the worker must leave its job leased (the
lease then runs out and the reaper decides) and the process must still exit.
:class:`concurrent.futures.ThreadPoolExecutor` cannot do that: its threads are
joined when the interpreter exits, so one stubborn handler would hold the
process until it returned. These threads are daemon threads, which the
interpreter does not wait for.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from jobrun.errors import ConfigurationError, UsageError

__all__ = ["DaemonThreadPool"]

T = TypeVar("T")

_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreadPool:
    """Runs callables on at most ``max_workers`` daemon threads, started as needed."""

    def __init__(self, max_workers: int, *, name_prefix: str = "jobrun-handler") -> None:
        if max_workers < 1:
            raise ConfigurationError(f"max_workers must be at least 1, got {max_workers}")
        self._max_workers = max_workers
        self._name_prefix = name_prefix
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shut_down = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a pool thread; the future holds its result or exception."""
        future: Future[T] = Future()
        with self._lock:
            if self._shut_down:
                raise UsageError("the thread pool is shut down")
            self._queue.put((future, fn, args))
            # A thread that is idle takes the item; otherwise start one, up to the limit.
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._work,
                    name=f"{self._name_prefix}-{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return future

    def shutdown(self) -> None:
        """Refuse new work and let idle threads end; never waits for running ones."""
        with self._lock:
            self._shut_down = True
            for _ in self._threads:
                self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args
            self._idle.release()
