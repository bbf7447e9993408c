-- +goose Up

-- One row per waitlist entry: a checkout waiting in line for quantity units
-- of a SKU at one location, or (location_id NULL) at whichever location frees
-- them. (checkout_id, request_key) names the join request, the fingerprint of
-- its inputs tells a retry from a reused key, as for reservations. seq is the
-- join order: offers go first-fit in seq order (store/waitlist_offer.go).
-- Status moves waiting -> offered | left | expired, once; an offered entry
-- names the HELD reservation it was handed (waitlist:<id> is its request key).
CREATE TABLE waitlist_entries (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    checkout_id       text NOT NULL CHECK (char_length(checkout_id) BETWEEN 1 AND 128),
    request_key       text NOT NULL CHECK (char_length(request_key) BETWEEN 1 AND 128),
    fingerprint       bytea NOT NULL,
    sku_id            bigint NOT NULL REFERENCES skus (id),
    location_id       bigint REFERENCES locations (id),
    quantity          integer NOT NULL CHECK (quantity > 0),
    offer_ttl_seconds integer NOT NULL CHECK (offer_ttl_seconds > 0),
    status            text NOT NULL DEFAULT 'waiting' CHECK (status IN ('waiting', 'offered', 'left', 'expired')),
    expires_at        timestamptz NOT NULL,
    reservation_id    uuid REFERENCES reservations (id),
    joined_at         timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    ended_at          timestamptz,
    UNIQUE (checkout_id, request_key),
    CHECK ((status = 'offered') = (reservation_id IS NOT NULL)),
    CHECK ((status = 'waiting') = (ended_at IS NULL))
);

-- One live (waiting) entry per checkout and SKU. An offered entry is done
-- waiting: the checkout may join again once its hold is over.
CREATE UNIQUE INDEX waitlist_entries_live_idx ON waitlist_entries (checkout_id, sku_id) WHERE status = 'waiting';

-- The line: waiting entries of a SKU in join order. Every path that frees
-- units walks it from the front for the entries that fit (an index descent
-- per offer), and with nothing waiting it is one probe of an empty range.
-- Terminal entries drop out, so a long sale's history does not slow it.
CREATE INDEX waitlist_entries_line_idx ON waitlist_entries (sku_id, seq)
    INCLUDE (location_id, quantity, expires_at) WHERE status = 'waiting';

-- Waiting entries of a SKU by quantity: before walking the line, an offer
-- asks whether anyone waiting needs no more than is free (one descent),
-- so units that fit nobody (say one back while everyone waits for two) cost
-- a probe, not a walk through the whole line.
CREATE INDEX waitlist_entries_fit_idx ON waitlist_entries (sku_id, quantity) WHERE status = 'waiting';

-- Waiting entries by deadline, for their expiry.
CREATE INDEX waitlist_entries_waiting_due_idx ON waitlist_entries (expires_at) WHERE status = 'waiting';

-- A checkout's entries, for its fair-use count.
CREATE INDEX waitlist_entries_checkout_idx ON waitlist_entries (checkout_id) WHERE status = 'waiting';

-- +goose Down
DROP TABLE waitlist_entries;
