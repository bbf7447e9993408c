-- +goose Up

-- Idempotency only where the caller asked for it. A receipt's reference
-- names one receipt (a delivery note), so receiveStock stays idempotent per
-- (sku, location, reference). An adjustment's reference is free text for
-- the ledger (an RMA, a count sheet): two damaged units booked under one RMA
-- are two adjustments, and keying them by reference swallowed the second.
-- adjustStock is idempotent only when the call carries a requestKey, per
-- (sku, location, requestKey), kept here: the first call writes its row
-- before it touches the balance (a concurrent twin on any instance waits on
-- the primary key, then finds the row); a repeat with the same delta,
-- reason, reference and expectedOnHand is a replay that changes nothing,
-- any other input under the key is IDEMPOTENCY_KEY_REUSED. A refused call
-- rolls back and leaves its key free.
CREATE TABLE stock_adjustment_keys (
    sku_id           bigint NOT NULL,
    location_id      bigint NOT NULL,
    request_key      text NOT NULL CHECK (char_length(request_key) BETWEEN 1 AND 128),
    delta            integer NOT NULL,
    reason           text NOT NULL,
    reference        text NOT NULL,
    expected_on_hand integer,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku_id, location_id, request_key),
    FOREIGN KEY (sku_id, location_id) REFERENCES balances (sku_id, location_id)
);

-- stock_references keeps receipts only: the adjustments' rows keyed the
-- free-text reference and are dropped (no call before this one sent a
-- requestKey, so none of them can be a retry's key).
DELETE FROM stock_references WHERE kind = 'adjusted';
ALTER TABLE stock_references
    DROP CONSTRAINT stock_references_pkey,
    DROP COLUMN kind,
    DROP COLUMN reason,
    ADD PRIMARY KEY (sku_id, location_id, reference);

-- +goose Down
ALTER TABLE stock_references
    DROP CONSTRAINT stock_references_pkey,
    ADD COLUMN kind text NOT NULL DEFAULT 'received' CHECK (kind IN ('received', 'adjusted')),
    ADD COLUMN reason text,
    ADD PRIMARY KEY (sku_id, location_id, kind, reference);
ALTER TABLE stock_references ALTER COLUMN kind DROP DEFAULT;
DROP TABLE stock_adjustment_keys;
