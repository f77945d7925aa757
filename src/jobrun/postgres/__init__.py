"""The only hand-written part of jobrun that talks to PostgreSQL.

Everything else (the worker, the scheduler, the CLI) goes through the functions and
ports exported here; psycopg and the generated query layer (``jobrun.sqlc``) stay
behind this package, which an import-linter contract enforces.
"""

from __future__ import annotations

from jobrun.postgres.embedded import default_embedded_dir, embedded_database_url
from jobrun.postgres.finished import FinishWatcher
from jobrun.postgres.goose_files import Migration, load_migrations, parse_migration
from jobrun.postgres.lock import AdvisoryLock, AdvisoryLocker, lock_keys
from jobrun.postgres.migrate import MigrationStatus, migrate, migration_status
from jobrun.postgres.notify import Notifier
from jobrun.postgres.pool import (
    Pool,
    SyncPool,
    database_location,
    open_pool,
    open_sync_pool,
    resolve_database_url,
)
from jobrun.postgres.store import DEFAULT_NOTIFY_CHANNEL, Store
from jobrun.postgres.store_sync import SyncStore
from jobrun.postgres.sync_producer import SyncProducer

__all__ = [
    "DEFAULT_NOTIFY_CHANNEL",
    "AdvisoryLock",
    "AdvisoryLocker",
    "FinishWatcher",
    "Migration",
    "MigrationStatus",
    "Notifier",
    "Pool",
    "Store",
    "SyncPool",
    "SyncProducer",
    "SyncStore",
    "database_location",
    "default_embedded_dir",
    "embedded_database_url",
    "load_migrations",
    "lock_keys",
    "migrate",
    "migration_status",
    "open_pool",
    "open_sync_pool",
    "parse_migration",
    "resolve_database_url",
]
