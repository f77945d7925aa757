"""Run jobrun's async entry points on the fastest event loop available.

A worker spends most of its Python time in the event loop itself (a task per
job, callbacks per I/O event), so uvloop, where it is installed (a default
dependency on Linux and macOS), is worth a measured 5-15% on the no-op path.
Without it the standard asyncio loop is used, unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on uvloop when available, else on asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
