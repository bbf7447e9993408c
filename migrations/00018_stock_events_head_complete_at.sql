-- +goose Up

-- When the relay's last complete batch began: every change committed before
-- this moment has a seq at most last_seq. The relay sets it (its
-- transaction's start) with last_seq whenever its batch took every
-- committed, unpublished event (a batch cut at its limit leaves it as it
-- was). A reader that has applied through last_seq is therefore at most
-- now() - complete_at stale, a tighter bound than the oldest waiting
-- event's own time, which counts from its writer's transaction start and
-- so added each writer's latency to the measured staleness. NULL (no such
-- batch yet) bounds nothing.
ALTER TABLE stock_events_head ADD COLUMN complete_at timestamptz;

-- +goose Down
ALTER TABLE stock_events_head DROP COLUMN complete_at;
