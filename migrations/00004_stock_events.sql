-- +goose Up

-- The outbox behind live stock: one row per balance change, written in the
-- transaction that made the change, carrying the balance after it. seq is NULL
-- until the relay publishes the row (store.StockEventsPublish): only the relay
-- assigns seq, one batch at a time under an advisory lock, as max(seq) + 1, 2,
-- …, so the published rows are always exactly seq 1..M with no gap, whatever
-- order the writers committed in.
CREATE TABLE stock_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq            bigint UNIQUE,
    sku_id         bigint NOT NULL REFERENCES skus (id),
    location_id    bigint NOT NULL REFERENCES locations (id),
    cause          text NOT NULL CHECK (cause IN ('received', 'adjusted', 'reserved', 'confirmed', 'released',
                                                  'expired', 'imported', 'preorder_allocated')),
    on_hand        integer NOT NULL,
    reserved       integer NOT NULL,
    reservation_id uuid,
    checkout_id    text,
    at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stock_events_unpublished_idx ON stock_events (id) WHERE seq IS NULL;
CREATE INDEX stock_events_at_idx ON stock_events (at) WHERE seq IS NOT NULL;

-- Retention: events through this seq have been pruned; a cursor older than
-- that cannot be resumed.
CREATE TABLE stock_events_pruned (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    through_seq bigint NOT NULL DEFAULT 0
);
INSERT INTO stock_events_pruned DEFAULT VALUES;

-- +goose Down
DROP TABLE stock_events_pruned;
DROP TABLE stock_events;
