-- +goose Up

-- One row per setStockLevels call (and per chunk of `inventory stock import`),
-- written in the call's transaction: the unique reference makes the call
-- idempotent. A second call with the reference waits on the first's insert,
-- then finds its row: the same fingerprint (SHA-256 of the levels) answers
-- the stored outcome, another is IDEMPOTENCY_KEY_REUSED.
CREATE TABLE stock_syncs (
    reference   text PRIMARY KEY CHECK (char_length(reference) BETWEEN 1 AND 512),
    fingerprint bytea NOT NULL,
    outcome     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE stock_syncs;
