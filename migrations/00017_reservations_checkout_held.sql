-- +goose NO TRANSACTION
-- +goose Up

-- A checkout token's reserve counts its checkout's live holds (the fair-use
-- limits, store/checkout_usage.go) in every batch. This index holds only the
-- held rows, by checkout, with their deadline, so the count descends once per
-- checkout and reads that checkout's live holds alone. Without it the planner
-- either filtered the checkout's every reservation, terminal ones included,
-- or (with the statistics of a table that grew quickly, as in a sale's first
-- minutes) intersected with reservations_held_due_idx, reading every live
-- hold of the store, 12,000 index entries 10 s into the bench, per batch.
-- Built CONCURRENTLY so a large reservations table keeps taking reserves
-- while it builds (hence no transaction; IF NOT EXISTS lets a retried start
-- finish the job).
CREATE INDEX CONCURRENTLY IF NOT EXISTS reservations_checkout_held_idx
    ON reservations (checkout_id) INCLUDE (expires_at) WHERE status = 'held';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reservations_checkout_held_idx;
