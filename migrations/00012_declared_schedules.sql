-- +goose Up
-- Periodic jobs declared in code, next to their handlers (jobrun.periodic).
--
-- Every worker whose registry declares periodic jobs writes its whole set of
-- declarations here, under the digest of its content, when it starts and
-- again while it runs: a row is one version of one group's code, live until
-- live_until. `since` is when that version last appeared after being gone,
-- so among a group's live rows the one with the latest `since` is the code
-- deployed most recently, and the scheduler's leader writes that set, and
-- only that one, into schedules. A version that stops being renewed lapses,
-- and the newest version still running takes over (a rollback included).
CREATE TABLE IF NOT EXISTS schedule_declarations (
    declared_group text        NOT NULL,
    digest         text        NOT NULL,
    declarations   jsonb       NOT NULL,
    since          timestamptz NOT NULL,
    live_until     timestamptz NOT NULL,
    PRIMARY KEY (declared_group, digest),
    CONSTRAINT schedule_declarations_group_valid CHECK (
        declared_group <> '' AND length(declared_group) <= 128
    ),
    CONSTRAINT schedule_declarations_digest_valid CHECK (length(digest) = 64),
    CONSTRAINT schedule_declarations_is_array CHECK (jsonb_typeof(declarations) = 'array'),
    CONSTRAINT schedule_declarations_live_after_since CHECK (live_until >= since)
);

-- Where a schedule comes from. 'manual': created through the CLI, the
-- dashboard or the store's create_schedule; the code's declarations never
-- touch it. 'code': written by the scheduler's leader from a group's
-- declarations (declared_group), the content last written being
-- declared_digest; removed_from_code_at is set (and the schedule paused)
-- once the group's current code no longer declares it. Constant defaults
-- and NULL columns: a catalog-only change, and the lock_timeout keeps the
-- brief ACCESS EXCLUSIVE lock from queueing the scheduler behind it.
SET LOCAL lock_timeout = '5s';
ALTER TABLE schedules
    ADD COLUMN IF NOT EXISTS origin text NOT NULL DEFAULT 'manual'
        CONSTRAINT schedules_origin_valid CHECK (origin IN ('manual', 'code')),
    ADD COLUMN IF NOT EXISTS declared_group text
        CONSTRAINT schedules_declared_group_bounded CHECK (length(declared_group) <= 128),
    ADD COLUMN IF NOT EXISTS declared_digest text
        CONSTRAINT schedules_declared_digest_valid CHECK (length(declared_digest) = 64),
    ADD COLUMN IF NOT EXISTS removed_from_code_at timestamptz,
    -- NOT VALID skips the scan of existing rows: each is 'manual' with three
    -- NULLs here, so none can break it; every row written from now on is checked.
    ADD CONSTRAINT schedules_origin_consistent CHECK (
        CASE origin
            WHEN 'code' THEN declared_group IS NOT NULL AND declared_digest IS NOT NULL
            ELSE declared_group IS NULL AND declared_digest IS NULL
                AND removed_from_code_at IS NULL
        END
    ) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '5s';
-- squawk-ignore ban-drop-column
ALTER TABLE schedules DROP COLUMN IF EXISTS removed_from_code_at;
-- squawk-ignore ban-drop-column
ALTER TABLE schedules DROP COLUMN IF EXISTS declared_digest;
-- squawk-ignore ban-drop-column
ALTER TABLE schedules DROP COLUMN IF EXISTS declared_group;
-- squawk-ignore ban-drop-column
ALTER TABLE schedules DROP COLUMN IF EXISTS origin;
DROP TABLE IF EXISTS schedule_declarations;
