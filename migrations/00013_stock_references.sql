-- +goose Up

-- receiveStock and adjustStock are idempotent per (sku, location, reference):
-- a warehouse system that retries after a lost answer must not count the
-- delivery twice. Each accepted call writes its row here in its own
-- transaction, before it touches the balance; the primary key makes a
-- concurrent twin (on any instance) wait for the first to commit or roll
-- back, then find the row: the same delta (and reason) is a replay that
-- changes nothing, another is IDEMPOTENCY_KEY_REUSED. A refused call rolls
-- back and leaves its reference free. Receipts and adjustments are separate
-- keys (kind): a return booked against a delivery's reference is its own act.
--
-- References were never unique before, and the ledger holds duplicates, so
-- the key lives in a table of its own rather than in a unique index on
-- stock_movements. Existing receipts and adjustments are copied in, the first
-- of each key (by ledger order), so a retry that straddles the upgrade is a
-- replay too; setStockLevels' rows are left out (stock_syncs keys them).
CREATE TABLE stock_references (
    sku_id      bigint NOT NULL,
    location_id bigint NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('received', 'adjusted')),
    reference   text NOT NULL CHECK (char_length(reference) BETWEEN 1 AND 512),
    delta       integer NOT NULL,
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku_id, location_id, kind, reference),
    FOREIGN KEY (sku_id, location_id) REFERENCES balances (sku_id, location_id)
);

INSERT INTO stock_references (sku_id, location_id, kind, reference, delta, reason, created_at)
SELECT DISTINCT ON (sku_id, location_id, cause, reference)
       sku_id, location_id, cause, reference, on_hand_delta, CASE WHEN cause = 'adjusted' THEN reason END, created_at
  FROM stock_movements
 WHERE cause IN ('received', 'adjusted') AND reference IS NOT NULL
   AND char_length(reference) BETWEEN 1 AND 512
   AND reservation_id IS NULL AND coalesce(reason, '') <> 'stock_sync'
 ORDER BY sku_id, location_id, cause, reference, id;

-- +goose Down
DROP TABLE stock_references;
