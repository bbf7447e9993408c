-- +goose Up

-- Until this version a checkout token (the shopper's browser) could confirm
-- its own hold. Such orders followed no payment the backend vouched for: their
-- codes are never revealed. No new order can be self-confirmed (confirming is
-- a service or admin act), so only the orders confirmed before are marked,
-- from the ledger's record of who confirmed them.
ALTER TABLE orders ADD COLUMN self_confirmed boolean NOT NULL DEFAULT false;
UPDATE orders o SET self_confirmed = true
 WHERE EXISTS (SELECT 1 FROM stock_movements m
                WHERE m.reservation_id = o.reservation_id AND m.cause = 'confirmed'
                  AND m.actor = 'checkout:' || o.checkout_id);

-- +goose Down
ALTER TABLE orders DROP COLUMN self_confirmed;
