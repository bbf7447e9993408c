-- +goose Up

-- The start-up key check reads one code per key id; with this index it finds
-- the key ids with a loose index scan instead of reading every code.
CREATE INDEX codes_key_idx ON codes (key_id, id);

-- +goose Down
DROP INDEX codes_key_idx;
