-- +goose NO TRANSACTION
-- +goose Up

-- An offer is a hold: an entry joined with a checkout token is offered only
-- while its checkout stays within the fair-use caps a reserve of that token
-- is bound by (store/waitlist_offer.go). The offer runs in whatever
-- transaction freed the units (a warehouse receipt, another shopper's
-- release), with no token in sight, so the entry records at join the caps
-- that bind it: max_live_holds and max_units_per_sku, both NULL for an
-- entry joined by a service or admin key (trusted backends, bound by no
-- cap, as their reserves are not). An entry passed over because its offer
-- would break a cap keeps its place and says which (skipped_reason), until
-- it is offered.
--
-- No transaction (the index below is built CONCURRENTLY, so a live line
-- keeps taking joins); IF NOT EXISTS lets a retried start finish the job.
-- Nullable columns without a default are added without rewriting the table.
ALTER TABLE waitlist_entries
    ADD COLUMN IF NOT EXISTS max_live_holds integer CHECK (max_live_holds > 0),
    ADD COLUMN IF NOT EXISTS max_units_per_sku integer CHECK (max_units_per_sku > 0),
    ADD COLUMN IF NOT EXISTS skipped_reason text CHECK (skipped_reason IN ('live_holds', 'units_per_sku'));

-- Waiting entries without a location, by SKU and quantity. Units freed at
-- one balance of a SKU are offered to such an entry from all the SKU's
-- balances, as a reserve would source them, so every path that frees units
-- asks whether the SKU has one (one descent) and, if so, locks all its
-- balances in the global order before the first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS waitlist_entries_unlocated_idx
    ON waitlist_entries (sku_id, quantity) WHERE status = 'waiting' AND location_id IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS waitlist_entries_unlocated_idx;
ALTER TABLE waitlist_entries DROP COLUMN IF EXISTS skipped_reason, DROP COLUMN IF EXISTS max_units_per_sku, DROP COLUMN IF EXISTS max_live_holds;
