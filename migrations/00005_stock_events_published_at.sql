-- +goose Up

-- Retention counts from when an event was published, not from when its
-- writer's transaction started: seq order and publish order agree, so pruning
-- by age always removes a prefix of the sequence.
ALTER TABLE stock_events ADD COLUMN published_at timestamptz;
UPDATE stock_events SET published_at = at WHERE seq IS NOT NULL;
DROP INDEX stock_events_at_idx;
CREATE INDEX stock_events_published_at_idx ON stock_events (published_at) WHERE seq IS NOT NULL;

-- +goose Down
DROP INDEX stock_events_published_at_idx;
CREATE INDEX stock_events_at_idx ON stock_events (at) WHERE seq IS NOT NULL;
ALTER TABLE stock_events DROP COLUMN published_at;
