-- Queries on widget_notes: the header of a file whose first query has no comment.

-- name: NoteAdd :one
INSERT INTO widget_notes (widget_id, body) VALUES (@widget_id, @body) RETURNING id;

-- name: NoteCount :one
SELECT count(*) FROM widget_notes;

-- name: NotesFor :batchmany
SELECT * FROM widget_notes WHERE widget_id = @widget_id ORDER BY id;

-- name: NoteTimes :one
SELECT local_at, clock, day, ratio, ratio4, blob, small, medium FROM widgets WHERE id = @id;
