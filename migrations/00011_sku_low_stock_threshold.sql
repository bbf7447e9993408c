-- +goose Up

-- A SKU's own stock.low threshold. NULL: each webhook endpoint's
-- low_stock_threshold applies. Read at delivery time, so a change applies to
-- every event not yet delivered.
ALTER TABLE skus ADD COLUMN low_stock_threshold integer
    CHECK (low_stock_threshold BETWEEN 0 AND 1000000000);

-- +goose Down
ALTER TABLE skus DROP COLUMN low_stock_threshold;
