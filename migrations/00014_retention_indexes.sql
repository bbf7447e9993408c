-- +goose NO TRANSACTION
-- +goose Up

-- The retention job deletes code-reveal audit rows and webhook delivery log
-- rows older than their settings, oldest first, in bounded batches: these
-- indexes let each batch find its rows without reading the table. Built
-- CONCURRENTLY so a large delivery log keeps taking inserts while they build
-- (hence no transaction; IF NOT EXISTS lets a retried start finish the job).
CREATE INDEX CONCURRENTLY IF NOT EXISTS code_reveals_at_idx ON code_reveals (at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_deliveries_at_idx ON webhook_deliveries (at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS code_reveals_at_idx;
