-- +goose Up

-- Identifiers that clients choose are 1..128 characters (docs/api.md); the checks
-- repeat the application's validation so no other writer can break them.
CREATE TABLE locations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code       text NOT NULL UNIQUE CHECK (char_length(code) BETWEEN 1 AND 128),
    name       text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    priority   integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE skus (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code       text NOT NULL UNIQUE CHECK (char_length(code) BETWEEN 1 AND 128),
    name       text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    kind       text NOT NULL CHECK (kind IN ('quantity', 'codes')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per SKU and location. available = on_hand - reserved is derived and
-- never stored. The CHECKs are the last line of defence behind the conditional
-- updates in store/: no code path can oversell or go negative.
CREATE TABLE balances (
    sku_id         bigint NOT NULL REFERENCES skus (id),
    location_id    bigint NOT NULL REFERENCES locations (id),
    on_hand        integer NOT NULL DEFAULT 0 CHECK (on_hand >= 0),
    reserved       integer NOT NULL DEFAULT 0 CHECK (reserved >= 0 AND reserved <= on_hand),
    pending_supply integer NOT NULL DEFAULT 0 CHECK (pending_supply >= 0),
    preordered     integer NOT NULL DEFAULT 0 CHECK (preordered >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku_id, location_id)
);
CREATE INDEX balances_location_idx ON balances (location_id);

-- Append-only ledger: one row per change of a balance, written in the same
-- transaction as the change. For every balance, on_hand = sum(on_hand_delta),
-- and likewise for the other columns.
CREATE TABLE stock_movements (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku_id               bigint NOT NULL,
    location_id          bigint NOT NULL,
    on_hand_delta        integer NOT NULL DEFAULT 0,
    reserved_delta       integer NOT NULL DEFAULT 0,
    pending_supply_delta integer NOT NULL DEFAULT 0,
    preordered_delta     integer NOT NULL DEFAULT 0,
    cause                text NOT NULL CHECK (cause IN (
        'received', 'adjusted', 'reserved', 'confirmed', 'released', 'expired',
        'imported', 'preorder_set', 'preorder_allocated')),
    reason               text,
    reference            text,
    actor                text NOT NULL,
    reservation_id       uuid,
    created_at           timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (sku_id, location_id) REFERENCES balances (sku_id, location_id)
);
CREATE INDEX stock_movements_balance_idx ON stock_movements (sku_id, location_id);

-- Admin and service keys. Only a SHA-256 of the secret is stored: secrets are 256
-- random bits, so a fast hash is enough and lookups stay one index probe.
CREATE TABLE api_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 128),
    role        text NOT NULL CHECK (role IN ('admin', 'service')),
    secret_hash bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
-- A name identifies one live key; revoked keys keep their row for audit.
CREATE UNIQUE INDEX api_keys_live_name_idx ON api_keys (name) WHERE revoked_at IS NULL;

-- +goose Down
DROP TABLE api_keys;
DROP TABLE stock_movements;
DROP TABLE balances;
DROP TABLE skus;
DROP TABLE locations;
