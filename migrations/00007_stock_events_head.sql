-- +goose Up

-- The newest seq the relay has assigned. The relay reads and moves it under
-- its advisory lock, in the transaction that publishes, instead of asking
-- max(seq): the seq index keeps an entry with a NULL seq for every event's
-- unpublished row version until vacuum, all at the end a backward scan starts
-- from, so max(seq) read more of them on every tick the faster events came.
CREATE TABLE stock_events_head (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last_seq bigint NOT NULL
);
INSERT INTO stock_events_head (last_seq)
SELECT greatest(coalesce(max(seq), 0), (SELECT through_seq FROM stock_events_pruned)) FROM stock_events;

-- +goose Down
DROP TABLE stock_events_head;
