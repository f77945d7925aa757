"""TEMPORARY stand-in for the generated jobrun.sqlc.goose / jobrun.sqlc.system modules.

Reads the named queries from db/query/*.sql at runtime (so no SQL lives here) until
the sqlc plugin generates the real modules; delete once they exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from psycopg.rows import dict_row

_QUERY_DIR = Path(__file__).resolve().parents[3] / "db" / "query"
_NAME = re.compile(r"^-- name: (\w+) :(\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in _QUERY_DIR.glob("*.sql"):
        text = path.read_text()
        parts = _NAME.split(text)
        for i in range(1, len(parts), 3):
            body = "\n".join(
                ln for ln in parts[i + 2].splitlines() if not ln.startswith("--")
            ).strip()
            queries[parts[i]] = re.sub(r"sqlc\.arg\((\w+)\)", r"%(\1)s", body)
    return queries


_Q = _load()


class AsyncQuerier:
    """Stand-in AsyncQuerier."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def _rows(self, name: str, **params: Any) -> list[SimpleNamespace]:
        async with self._conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(_Q[name].encode(), params or None)
            if cur.description is None:
                return []
            return [SimpleNamespace(**r) for r in await cur.fetchall()]

    async def goose_version_list(self) -> list[Any]:
        """Stand-in."""
        return await self._rows("GooseVersionList")

    async def goose_version_insert(self, *, version_id: int, is_applied: bool) -> None:
        """Stand-in."""
        await self._rows("GooseVersionInsert", version_id=version_id, is_applied=is_applied)

    async def goose_lock_acquire(self, *, lock_key: int) -> None:
        """Stand-in."""
        await self._rows("GooseLockAcquire", lock_key=lock_key)

    async def goose_lock_release(self, *, lock_key: int) -> bool | None:
        """Stand-in."""
        return bool((await self._rows("GooseLockRelease", lock_key=lock_key))[0].released)

    async def goose_table_exists(self) -> bool | None:
        """Stand-in."""
        return bool((await self._rows("GooseTableExists"))[0].present)

    async def database_now(self) -> Any:
        """Stand-in."""
        return (await self._rows("DatabaseNow"))[0].now
