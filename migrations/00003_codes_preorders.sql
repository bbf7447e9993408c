-- +goose Up

-- One import of codes for a SKU at a location. (sku, batch_ref) names it:
-- importing the same batch again inserts nothing and returns these counts.
CREATE TABLE code_batches (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku_id           bigint NOT NULL REFERENCES skus (id),
    location_id      bigint NOT NULL REFERENCES locations (id),
    batch_ref        text NOT NULL CHECK (char_length(batch_ref) BETWEEN 1 AND 128),
    received         integer NOT NULL DEFAULT 0,
    inserted         integer NOT NULL DEFAULT 0,
    duplicates       integer NOT NULL DEFAULT 0,
    rejected         integer NOT NULL DEFAULT 0,
    preorders_filled integer NOT NULL DEFAULT 0,
    actor            text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (sku_id, batch_ref)
);

-- One row per unit of a CODES SKU: available -> held -> sold, held ->
-- available the only way back. The code is stored only encrypted
-- (AES-256-GCM, key_id names the key for rotation); fingerprint is a keyed
-- HMAC of the normalized code, unique per SKU, so a code is never stocked
-- twice. The balance's on_hand counts available + held rows and reserved the
-- held ones; both change in the same transaction as the rows.
CREATE TABLE codes (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku_id              bigint NOT NULL,
    location_id         bigint NOT NULL,
    batch_id            bigint NOT NULL REFERENCES code_batches (id),
    status              text NOT NULL DEFAULT 'available' CHECK (status IN ('available', 'held', 'sold')),
    ciphertext          bytea NOT NULL,
    key_id              text NOT NULL,
    fingerprint         bytea NOT NULL,
    reservation_line_id bigint REFERENCES reservation_lines (id),
    order_line_id       bigint REFERENCES order_lines (id),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (sku_id, location_id) REFERENCES balances (sku_id, location_id),
    UNIQUE (sku_id, fingerprint),
    CHECK (status <> 'available' OR (reservation_line_id IS NULL AND order_line_id IS NULL)),
    CHECK (status <> 'held' OR (reservation_line_id IS NOT NULL AND order_line_id IS NULL)),
    CHECK (status <> 'sold' OR order_line_id IS NOT NULL)
);
-- Claims take the oldest batch first.
CREATE INDEX codes_claim_idx ON codes (sku_id, location_id, batch_id, id) WHERE status = 'available';
CREATE INDEX codes_reservation_line_idx ON codes (reservation_line_id) WHERE reservation_line_id IS NOT NULL;
CREATE INDEX codes_order_line_idx ON codes (order_line_id) WHERE order_line_id IS NOT NULL;

-- Every time plaintext codes were shown: who, when, which order line.
CREATE TABLE code_reveals (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_line_id bigint NOT NULL REFERENCES order_lines (id),
    actor         text NOT NULL,
    codes         integer NOT NULL,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX code_reveals_order_line_idx ON code_reveals (order_line_id);

-- Pre-orders: a sold line's units that are not in stock yet. pending counts
-- down as stock or codes arrive and are allocated first-in-first-out.
ALTER TABLE order_lines
    ADD COLUMN preorder_quantity integer NOT NULL DEFAULT 0 CHECK (preorder_quantity >= 0),
    ADD COLUMN pending integer NOT NULL DEFAULT 0 CHECK (pending >= 0 AND pending <= preorder_quantity);
CREATE INDEX order_lines_pending_idx ON order_lines (sku_id, location_id, id) WHERE pending > 0;

-- What is promised against supply never exceeds the supply expected.
ALTER TABLE balances ADD CHECK (preordered <= pending_supply);

-- +goose Down
ALTER TABLE balances DROP CONSTRAINT balances_check1;
DROP INDEX order_lines_pending_idx;
ALTER TABLE order_lines DROP COLUMN pending, DROP COLUMN preorder_quantity;
DROP TABLE code_reveals;
DROP TABLE codes;
DROP TABLE code_batches;
