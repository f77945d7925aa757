-- Queries on schedule_declarations: each running version of a group's
-- periodic jobs declared in code (see migrations/00012_declared_schedules.sql).

-- name: ScheduleDeclarationsRenew :one
-- A worker running this version says so: the row lives until now +
-- live_for. A version that had lapsed (or was never seen) appears anew, its
-- `since` now, which makes it the group's newest. The group's versions
-- lapsed for over 30 days go in the same statement.
WITH forgotten AS (
    DELETE FROM schedule_declarations AS old
    WHERE old.declared_group = @declared_group
      AND old.digest <> @digest
      AND old.live_until < coalesce(sqlc.narg('now')::timestamptz, now()) - interval '30 days'
)
INSERT INTO schedule_declarations AS d (declared_group, digest, declarations, since, live_until)
VALUES (
    @declared_group, @digest, @declarations,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()) + @live_for::interval
)
ON CONFLICT (declared_group, digest) DO UPDATE
SET since = CASE WHEN d.live_until < excluded.since THEN excluded.since ELSE d.since END,
    live_until = greatest(d.live_until, excluded.live_until)
RETURNING d.since, d.live_until;

-- name: ScheduleDeclarationsCurrent :many
-- Each group's current version: of its live rows, the one that appeared
-- last (ties, which two transactions' clocks make unlikely, by digest).
SELECT DISTINCT ON (declared_group) declared_group, digest, since
FROM schedule_declarations
WHERE live_until >= coalesce(sqlc.narg('now')::timestamptz, now())
ORDER BY declared_group, since DESC, digest;

-- name: ScheduleDeclarationsGet :one
SELECT * FROM schedule_declarations WHERE declared_group = @declared_group AND digest = @digest;
