-- Queries on widgets. This file header is no query's doc comment, although
-- sqlc hands it to the first query with that query's own comment lines.

-- name: WidgetCreate :one
-- Insert one widget and return it whole. More than four parameters, so the
-- method takes a WidgetCreateParams.
--
-- A comment line may hold a backslash \d or "quotes" and keep them.
INSERT INTO widgets (uid, name, label, doc, raw, tags, scores, mood, maybe_mood, span, price)
VALUES (@uid, @name, sqlc.narg(label), @doc, sqlc.narg(raw), @tags, sqlc.narg(scores), @mood,
        sqlc.narg(maybe_mood), sqlc.narg(span), @price)
RETURNING *;

-- name: WidgetGet :one
SELECT * FROM widgets WHERE id = @id;

-- name: WidgetList :many
-- Widgets in any of the moods, up to now, by name or label.
SELECT * FROM widgets
-- A comment inside the statement stays out of the docstring.
WHERE mood = ANY(@moods::mood[])
  AND at <= coalesce(sqlc.narg('now')::timestamptz, now())
  AND (name = @name OR label = @name)
ORDER BY id;

-- name: WidgetSummary :many
SELECT id, name, maybe_mood, '50%' AS pct, tags
FROM widgets
WHERE name LIKE '%' || @pattern::text || '%'
ORDER BY id;

-- name: WidgetFind :many
-- Exactly four parameters: still keyword arguments.
SELECT id, name FROM widgets
WHERE name LIKE @prefix::text || '%' AND mood = @mood
  AND price BETWEEN @min_price::numeric AND @max_price::numeric
ORDER BY id;

-- name: WidgetNow :one
SELECT now()::timestamptz AS now;

-- name: WidgetIDs :many
SELECT id FROM widgets WHERE id = ANY(sqlc.slice('ids')) ORDER BY id;

-- name: WidgetRename :execrows
UPDATE widgets SET name = @name
WHERE id = @id AND name <> '$1 is not a parameter' AND name <> $$100% $2$$;

-- name: WidgetTouch :exec
UPDATE widgets SET at = now(), label = 'touched 100%' WHERE id = @id;

-- name: WidgetCopy :copyfrom
INSERT INTO widgets (uid, name, label, small, medium, price, ratio, active, blob, doc, at, day,
                     span, tags, mood)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15);

-- name: WidgetSetDoc :batchexec
UPDATE widgets SET doc = @doc, raw = sqlc.narg(raw) WHERE id = @id;

-- name: WidgetBatchGet :batchone
SELECT * FROM widgets WHERE id = @id;

-- name: WidgetBatchMoods :batchone
SELECT mood FROM widgets WHERE id = @id;
