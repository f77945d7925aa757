"""Handlers that return results, for ``jobrun worker --app tests.acceptance.results_app``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobrun.domain import Result
from jobrun.registry import JobContext, Registry

registry = Registry()


class Thumbnail(BaseModel):
    """What ``thumbnail`` returns: its declared result type."""

    width: int
    url: str


@registry.handler("thumbnail", result=Thumbnail)
async def thumbnail(ctx: JobContext, payload: Any) -> Thumbnail:
    return Thumbnail(width=payload["width"], url=f"/thumbs/{payload['name']}")


@registry.handler("count.rows")
def count_rows(ctx: JobContext, payload: Any) -> Any:
    async def record(conn: Any) -> None:
        await conn.execute("SELECT 1")

    return Result({"rows": len(payload), "names": payload}, commit=record)


@registry.handler("too.big")
async def too_big(ctx: JobContext, payload: Any) -> str:
    return "x" * (1 << 20)  # 1 MiB of text: over the limit once quoted
