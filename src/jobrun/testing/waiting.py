"""Wait for a condition instead of sleeping: the one polling helper of jobrun's tests.

A test that sleeps a fixed time before asserting is slow when the machine is
fast and flaky when it is slow. :func:`eventually` asks a question until the
answer is true, however long that takes up to a generous bound, and fails
with what it was waiting for when the bound passes. :func:`eventually_sync`
does the same in synchronous code (a test driving a subprocess, say).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")

DEFAULT_WITHIN = 30.0
"""Seconds a condition may take before the test fails: generous, since only failures wait it."""

_INTERVAL = 0.02


async def eventually(
    check: Callable[[], Awaitable[T] | T],
    *,
    within: float = DEFAULT_WITHIN,
    what: str | None = None,
) -> T:
    """Call ``check`` (sync or async) until it returns something true, and return that.

    Raises AssertionError naming ``what`` (or the check) and its last answer
    once ``within`` seconds pass; an exception ``check`` raises propagates.
    """
    deadline = time.monotonic() + within
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if answer:
            return answer
        if time.monotonic() > deadline:
            name = what or getattr(check, "__name__", repr(check))
            raise AssertionError(f"{name}: not true within {within}s (last answer {answer!r})")
        await asyncio.sleep(_INTERVAL)


def eventually_sync(
    check: Callable[[], T], *, within: float = DEFAULT_WITHIN, what: str | None = None
) -> T:
    """:func:`eventually` for synchronous code: call ``check`` until it returns something true."""
    deadline = time.monotonic() + within
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            name = what or getattr(check, "__name__", repr(check))
            raise AssertionError(f"{name}: not true within {within}s (last answer {answer!r})")
        time.sleep(_INTERVAL)
