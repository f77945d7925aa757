-- goose's bookkeeping table, exactly as the goose CLI creates it for PostgreSQL, so
-- either tool can take over a database the other migrated.
--
-- Why this DDL lives here and not in db/query/: sqlc analyses queries against the
-- schema in migrations/, and goose creates this table itself, before any migration
-- runs; a migration creating it would collide with goose. So the runner executes this
-- file at runtime (it ships inside the package), and sqlc.yaml lists it as an extra
-- schema file so db/query/goose.sql can be type-checked against it.
CREATE TABLE IF NOT EXISTS goose_db_version (
    id         serial    NOT NULL,
    version_id bigint    NOT NULL,
    is_applied boolean   NOT NULL,
    tstamp     timestamp NULL DEFAULT now(),
    PRIMARY KEY (id)
);
