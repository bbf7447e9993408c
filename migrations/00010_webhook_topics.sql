-- +goose Up

-- Webhook topics beyond stock.changed. low_stock_threshold is the endpoint's
-- stock.low threshold (one for every SKU). The indexes let delivery find, for
-- an event, the previous event of the same balance (the available before the
-- change: stock.low, stock.out, stock.back_in) and the earlier events of the
-- same reservation (one reservation.* delivery per reservation, not per line).
ALTER TABLE webhook_endpoints
    ADD COLUMN low_stock_threshold integer NOT NULL DEFAULT 5 CHECK (low_stock_threshold >= 0);
CREATE INDEX stock_events_balance_seq_idx ON stock_events (sku_id, location_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX stock_events_reservation_seq_idx ON stock_events (reservation_id, seq)
    WHERE reservation_id IS NOT NULL AND seq IS NOT NULL;

-- +goose Down
DROP INDEX stock_events_reservation_seq_idx;
DROP INDEX stock_events_balance_seq_idx;
ALTER TABLE webhook_endpoints DROP COLUMN low_stock_threshold;
