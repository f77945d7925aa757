-- Queries on schedules: job templates fired on a cron expression or interval.

-- name: ScheduleInsert :one
-- No row back when the name is taken: the insert is the check, so concurrent
-- creates of one name cannot both pass a separate lookup and then collide.
INSERT INTO schedules (
    name, type, queue, payload, priority, max_attempts, cron, every, timezone, next_run_at
) VALUES (
    @name, @type, @queue, @payload, @priority, @max_attempts,
    sqlc.narg('cron'), sqlc.narg('every'), @timezone, @next_run_at
)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: ScheduleGetByName :one
SELECT * FROM schedules WHERE name = @name;

-- name: ScheduleLockByName :one
SELECT * FROM schedules WHERE name = @name FOR UPDATE;

-- name: ScheduleUpdate :one
-- actor: who changed it, recorded as changed_by (NULL: not recorded), as a
-- pause or resume records it.
UPDATE schedules
SET type = @type, queue = @queue, payload = @payload, priority = @priority,
    max_attempts = @max_attempts, cron = sqlc.narg('cron'), every = sqlc.narg('every'),
    timezone = @timezone, next_run_at = @next_run_at, changed_by = sqlc.narg('actor'),
    updated_at = now()
WHERE name = @name
RETURNING *;

-- name: ScheduleRunNow :one
-- One job of the schedule, due now, outside its regular runs: next_run_at and
-- last_run_at stay as they are, and the job has no idempotency key (each ask
-- is one more job). Its enqueued event says it was asked for, and by whom
-- (actor; NULL names nobody). No row: no schedule has this name.
WITH schedule AS (
    SELECT * FROM schedules WHERE name = @name
), inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at
    )
    SELECT @id::uuid, schedule.queue, schedule.type, schedule.payload, schedule.priority,
           schedule.max_attempts, @backoff_kind::backoff_kind, @backoff_base::interval,
           @backoff_max::interval, now()
    FROM schedule
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, detail)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL, inserted.state, 0,
           'run now of schedule ' || @name::text
           || coalesce(' by ' || sqlc.narg('actor')::text, '')
    FROM inserted
)
SELECT * FROM inserted;

-- name: ScheduleSetPaused :one
-- actor: who paused or resumed it, recorded as changed_by (NULL: not recorded).
UPDATE schedules
SET paused = @paused,
    next_run_at = coalesce(sqlc.narg('next_run_at')::timestamptz, next_run_at),
    changed_by = sqlc.narg('actor'),
    updated_at = now()
WHERE name = @name
RETURNING *;

-- name: ScheduleDelete :execrows
DELETE FROM schedules WHERE name = @name;

-- name: ScheduleList :many
SELECT * FROM schedules ORDER BY name;

-- name: SchedulePage :many
-- Up to max_schedules schedules by name, after the name ``after`` (a keyset
-- page of the dashboard's Schedules page and its API).
-- plan: no sort
SELECT *
FROM schedules
WHERE sqlc.narg('after')::text IS NULL OR name > sqlc.narg('after')::text
ORDER BY name
LIMIT @max_schedules;

-- name: ScheduleLockDue :many
-- Due schedules, locked; SKIP LOCKED so an overlapping second leader takes
-- none of the same rows.
SELECT *
FROM schedules
WHERE NOT paused AND next_run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
ORDER BY next_run_at
LIMIT @max_schedules
FOR UPDATE SKIP LOCKED;

-- name: ScheduleAdvance :exec
UPDATE schedules
SET next_run_at = @next_run_at, last_run_at = @last_run_at, updated_at = now()
WHERE id = @id;

-- Schedules declared in code (jobrun.periodic). The scheduler's leader
-- writes a group's current declarations with these; they never match a
-- schedule of origin 'manual' or of another group, so a schedule made
-- through the CLI or the dashboard is never touched.

-- name: ScheduleLockForDeclarations :many
-- The group's schedules and any schedule holding one of the declared names,
-- locked against a firing leader (due_schedules) and a concurrent writer.
SELECT *
FROM schedules
WHERE (origin = 'code' AND declared_group = @declared_group) OR name = ANY(@names::text[])
ORDER BY name
FOR UPDATE;

-- name: ScheduleInsertDeclared :one
-- As ScheduleInsert, for a declared schedule: no row back when the name is taken.
INSERT INTO schedules (
    name, type, queue, payload, priority, max_attempts, cron, every, timezone, next_run_at,
    origin, declared_group, declared_digest
) VALUES (
    @name, @type, @queue, @payload, @priority, @max_attempts,
    sqlc.narg('cron'), sqlc.narg('every'), @timezone, @next_run_at,
    'code', @declared_group, @declared_digest
)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: ScheduleUpdateDeclared :one
-- Rewrite a schedule of the group to its declaration as it now is (and
-- declared again, if it had been removed from code).
UPDATE schedules
SET type = @type, queue = @queue, payload = @payload, priority = @priority,
    max_attempts = @max_attempts, cron = sqlc.narg('cron'), every = sqlc.narg('every'),
    timezone = @timezone, next_run_at = @next_run_at, paused = @paused,
    declared_digest = @declared_digest, removed_from_code_at = NULL, updated_at = now()
WHERE name = @name AND origin = 'code' AND declared_group = @declared_group
RETURNING *;

-- name: ScheduleRetireDeclared :many
-- Pause schedules of the group that its current code no longer declares;
-- they stay (with their history) and are marked removed from code.
UPDATE schedules
SET paused = true,
    removed_from_code_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    changed_by = @actor,
    updated_at = now()
WHERE name = ANY(@names::text[])
  AND origin = 'code' AND declared_group = @declared_group AND removed_from_code_at IS NULL
RETURNING name;
