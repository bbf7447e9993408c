-- +goose Up

-- One row per logical reserve request: (checkout_id, request_key) names it, and
-- the fingerprint of the normalized request tells a retry (same inputs) from a
-- reused key (other inputs). Terminal rows are kept so late retries see the
-- outcome. Status moves held -> confirmed | released | expired, once.
CREATE TABLE reservations (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    checkout_id    text NOT NULL CHECK (char_length(checkout_id) BETWEEN 1 AND 128),
    request_key    text NOT NULL CHECK (char_length(request_key) BETWEEN 1 AND 128),
    fingerprint    bytea NOT NULL,
    status         text NOT NULL DEFAULT 'held' CHECK (status IN ('held', 'confirmed', 'released', 'expired')),
    expires_at     timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    ended_at       timestamptz,
    release_reason text CHECK (release_reason IN ('payment_failed', 'fraud_rejected', 'customer_cancelled', 'checkout_abandoned', 'other')),
    UNIQUE (checkout_id, request_key),
    CHECK ((status = 'held') = (ended_at IS NULL)),
    CHECK (release_reason IS NULL OR status = 'released')
);
-- Due holds, for the sweeper and health; small because terminal rows drop out.
CREATE INDEX reservations_held_due_idx ON reservations (expires_at) WHERE status = 'held';
CREATE INDEX reservations_checkout_idx ON reservations (checkout_id, created_at);

-- What a reservation holds. One input line without a location may be sourced
-- from several locations, so line_no (the input line) can repeat.
CREATE TABLE reservation_lines (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reservation_id    uuid NOT NULL REFERENCES reservations (id),
    line_no           integer NOT NULL CHECK (line_no >= 0),
    sku_id            bigint NOT NULL REFERENCES skus (id),
    location_id       bigint NOT NULL REFERENCES locations (id),
    quantity          integer NOT NULL CHECK (quantity > 0),
    preorder_quantity integer NOT NULL DEFAULT 0 CHECK (preorder_quantity >= 0 AND preorder_quantity <= quantity)
);
CREATE INDEX reservation_lines_reservation_idx ON reservation_lines (reservation_id);
CREATE INDEX reservation_lines_balance_idx ON reservation_lines (sku_id, location_id);

-- Written in the same transaction as the confirm that creates them. ref is the
-- client's order reference, unique across the store.
CREATE TABLE orders (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ref            text NOT NULL UNIQUE CHECK (char_length(ref) BETWEEN 1 AND 128),
    reservation_id uuid NOT NULL UNIQUE REFERENCES reservations (id),
    checkout_id    text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Snapshot of what the buyer saw, per reservation line.
CREATE TABLE order_lines (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id            bigint NOT NULL REFERENCES orders (id),
    reservation_line_id bigint NOT NULL UNIQUE REFERENCES reservation_lines (id),
    sku_id              bigint NOT NULL REFERENCES skus (id),
    location_id         bigint NOT NULL REFERENCES locations (id),
    quantity            integer NOT NULL CHECK (quantity > 0),
    title               text,
    unit_price          text,
    currency            text
);
CREATE INDEX order_lines_order_idx ON order_lines (order_id);

-- One row per refused reserve (OUT_OF_STOCK), for the allocation failure rate.
-- Append-only, so a flash sale's failures never contend on a counter row.
CREATE TABLE allocation_failures (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    checkout_id text NOT NULL,
    sku_id      bigint,
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX allocation_failures_at_idx ON allocation_failures (at);

-- One row per sweeper pass, for inventoryHealth.lastSweepReleased.
CREATE TABLE sweeper_runs (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    released integer NOT NULL
);

ALTER TABLE stock_movements ADD FOREIGN KEY (reservation_id) REFERENCES reservations (id);

-- +goose Down
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_reservation_id_fkey;
DROP TABLE sweeper_runs;
DROP TABLE allocation_failures;
DROP TABLE order_lines;
DROP TABLE orders;
DROP TABLE reservation_lines;
DROP TABLE reservations;
