-- +goose Up

-- After the sale. A location ships on confirm (a confirm takes the units off
-- on_hand, as before) or on shipment (a warehouse that counts physical stock
-- until dispatch: a confirm moves the units from reserved to committed, and
-- on_hand falls only when fulfillOrder ships them). available =
-- on_hand - reserved - committed everywhere; a count is refused below
-- reserved + committed. CODES SKUs never commit: the code is the goods, sold
-- at confirm wherever it is kept.
ALTER TABLE locations
    ADD COLUMN fulfillment text NOT NULL DEFAULT 'on_confirm' CHECK (fulfillment IN ('on_confirm', 'on_shipment'));

ALTER TABLE balances
    ADD COLUMN committed integer NOT NULL DEFAULT 0 CHECK (committed >= 0),
    DROP CONSTRAINT balances_check,
    ADD CONSTRAINT balances_check CHECK (reserved >= 0 AND reserved + committed <= on_hand);

ALTER TABLE stock_movements
    ADD COLUMN committed_delta integer NOT NULL DEFAULT 0,
    DROP CONSTRAINT stock_movements_cause_check,
    ADD CONSTRAINT stock_movements_cause_check CHECK (cause IN (
        'received', 'adjusted', 'reserved', 'confirmed', 'released', 'expired',
        'imported', 'preorder_set', 'preorder_allocated', 'fulfilled', 'cancelled'));

ALTER TABLE stock_events
    ADD COLUMN committed integer NOT NULL DEFAULT 0,
    DROP CONSTRAINT stock_events_cause_check,
    ADD CONSTRAINT stock_events_cause_check CHECK (cause IN ('received', 'adjusted', 'reserved', 'confirmed', 'released',
        'expired', 'imported', 'preorder_allocated', 'fulfilled', 'cancelled'));

-- An order line's units end shipped (fulfilled) or given back (cancelled);
-- pending (pre-ordered, not yet allocated) is given back first on a cancel.
-- What is neither pending, fulfilled nor cancelled is in hand for the order:
-- at an on-shipment location, exactly the balance's committed units.
-- commits is the location's mode for the line's SKU when it was confirmed
-- (a location's mode never changes): its units in hand are committed.
ALTER TABLE order_lines
    ADD COLUMN fulfilled integer NOT NULL DEFAULT 0 CHECK (fulfilled >= 0),
    ADD COLUMN cancelled integer NOT NULL DEFAULT 0 CHECK (cancelled >= 0),
    ADD COLUMN commits boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT order_lines_open_check CHECK (pending + fulfilled + cancelled <= quantity);
-- Lines waiting to ship from an on-shipment location, for reconciliation,
-- the dashboard and the ship-age gauge: an on-confirm shop's lines, which
-- nobody ever fulfils, stay out of it.
-- Every insert says it (no default): one that forgot would store false at
-- an on-shipment location, and a fulfil would then move nothing.
ALTER TABLE order_lines ALTER COLUMN commits DROP DEFAULT;
CREATE INDEX order_lines_unshipped_idx ON order_lines (sku_id, location_id) WHERE commits AND pending + fulfilled + cancelled < quantity;

-- A sold code of a cancelled line is void: never sold again, still tied to
-- its order line so the reveal audit keeps it.
ALTER TABLE codes
    DROP CONSTRAINT codes_status_check,
    ADD CONSTRAINT codes_status_check CHECK (status IN ('available', 'held', 'sold', 'void')),
    ADD CONSTRAINT codes_void_check CHECK (status <> 'void' OR order_line_id IS NOT NULL);

-- One row per fulfilOrder / cancelOrder: (order, reference) names it, the
-- fingerprint of its normalized input tells a retry from a reused reference.
CREATE TABLE order_actions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    bigint NOT NULL REFERENCES orders (id),
    reference   text NOT NULL CHECK (char_length(reference) BETWEEN 1 AND 128),
    kind        text NOT NULL CHECK (kind IN ('fulfilled', 'cancelled')),
    fingerprint bytea NOT NULL,
    reason      text,
    units       integer NOT NULL,
    lines       jsonb NOT NULL, -- [{sku, location, quantity}] it moved, for webhooks
    actor       text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (order_id, reference)
);
-- The action behind a FULFILLED or CANCELLED event: one webhook per action.
ALTER TABLE stock_events ADD COLUMN order_action_id bigint;

-- The hot statements carry committed: the batch decides on
-- on_hand - reserved - committed and its events show the balance whole.
DROP FUNCTION inventory_reserve_batch_lock(text[], text[]);
-- +goose StatementBegin
CREATE FUNCTION inventory_reserve_batch_lock(p_skus text[], p_locs text[])
RETURNS TABLE (sku_id bigint, location_id bigint, sku_code text, location_code text, kind text,
               on_hand integer, reserved integer, committed integer, preorderable integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	SELECT b.sku_id, b.location_id, s.code, l.code, s.kind, b.on_hand, b.reserved, b.committed, b.pending_supply - b.preordered
	FROM (SELECT DISTINCT sku, loc FROM unnest(p_skus, p_locs) AS i(sku, loc)) i
	JOIN skus s ON s.code = i.sku JOIN locations l ON l.code = i.loc
	JOIN balances b ON b.sku_id = s.id AND b.location_id = l.id
	ORDER BY b.sku_id, b.location_id
	FOR NO KEY UPDATE OF b;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]);
-- +goose StatementBegin
CREATE FUNCTION inventory_reserve_batch_apply(
	bal_sku bigint[], bal_loc bigint[], bal_delta integer[],
	hold_id uuid[], hold_checkout text[], hold_actor text[], hold_sku bigint[], hold_loc bigint[],
	hold_q integer[], hold_on_hand integer[], hold_reserved integer[], hold_committed integer[],
	gone uuid[], failed_checkouts text[], failed_skus bigint[], hold_codes boolean[])
RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
	claimed_n bigint;
BEGIN
	WITH b AS (
		UPDATE balances b SET reserved = b.reserved + d.q, updated_at = now()
		FROM unnest(bal_sku, bal_loc, bal_delta) AS d(sku, loc, q)
		WHERE b.sku_id = d.sku AND b.location_id = d.loc
	), h AS (
		SELECT * FROM unnest(hold_id, hold_checkout, hold_actor, hold_sku, hold_loc, hold_q, hold_on_hand, hold_reserved,
		                     hold_committed, hold_codes)
		         WITH ORDINALITY AS h(id, checkout, actor, sku, loc, q, on_hand, reserved, committed, codes, ord)
	), lines AS (
		INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity, preorder_quantity)
		SELECT h.id, 0, h.sku, h.loc, h.q, 0 FROM h
		RETURNING reservation_lines.id, reservation_lines.reservation_id
	), ledger AS (
		INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor, reservation_id)
		SELECT h.sku, h.loc, h.q, 'reserved', h.actor, h.id FROM h ORDER BY h.ord
	), events AS (
		INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, committed, reservation_id, checkout_id)
		SELECT h.sku, h.loc, 'reserved', h.on_hand, h.reserved, h.committed, h.id, h.checkout FROM h ORDER BY h.ord
	), failures AS (
		INSERT INTO allocation_failures (checkout_id, sku_id) SELECT * FROM unnest(failed_checkouts, failed_skus)
	), refused AS (
		DELETE FROM reservations WHERE reservations.id = ANY(gone)
	), code_holds AS (
		SELECT h.id, h.sku, h.loc, h.q, sum(h.q) OVER (PARTITION BY h.sku, h.loc ORDER BY h.ord) - h.q AS first_unit
		FROM h WHERE h.codes
	), picked AS (
		SELECT c.id, d.sku, d.loc, row_number() OVER (PARTITION BY d.sku, d.loc ORDER BY c.batch_id, c.id) - 1 AS unit
		FROM (SELECT code_holds.sku, code_holds.loc, sum(code_holds.q) AS n FROM code_holds GROUP BY code_holds.sku, code_holds.loc) d
		CROSS JOIN LATERAL (
			SELECT codes.id, codes.batch_id FROM codes
			WHERE codes.sku_id = d.sku AND codes.location_id = d.loc AND codes.status = 'available'
			ORDER BY codes.batch_id, codes.id LIMIT d.n
			FOR NO KEY UPDATE SKIP LOCKED) c
	), claimed AS (
		UPDATE codes SET status = 'held', reservation_line_id = lines.id, updated_at = now()
		FROM picked
		JOIN code_holds ch ON ch.sku = picked.sku AND ch.loc = picked.loc
		     AND picked.unit >= ch.first_unit AND picked.unit < ch.first_unit + ch.q
		JOIN lines ON lines.reservation_id = ch.id
		WHERE codes.id = picked.id
		RETURNING 1
	)
	SELECT count(*) INTO claimed_n FROM claimed;
	RETURN claimed_n;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION inventory_stock_events_after(bigint, integer);
-- +goose StatementBegin
CREATE FUNCTION inventory_stock_events_after(p_after bigint, p_limit integer)
RETURNS TABLE (seq bigint, sku text, location text, cause text, on_hand integer, reserved integer, committed integer,
               at timestamptz, reservation_id uuid, checkout_id text)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
	RETURN QUERY
	SELECT e.seq, s.code, l.code, e.cause, e.on_hand, e.reserved, e.committed, e.at, e.reservation_id, coalesce(e.checkout_id, '')
	FROM stock_events e JOIN skus s ON s.id = e.sku_id JOIN locations l ON l.id = e.location_id
	WHERE e.seq > p_after ORDER BY e.seq LIMIT p_limit;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION inventory_stock_events_after(bigint, integer);
-- +goose StatementBegin
CREATE FUNCTION inventory_stock_events_after(p_after bigint, p_limit integer)
RETURNS TABLE (seq bigint, sku text, location text, cause text, on_hand integer, reserved integer,
               at timestamptz, reservation_id uuid, checkout_id text)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
	RETURN QUERY
	SELECT e.seq, s.code, l.code, e.cause, e.on_hand, e.reserved, e.at, e.reservation_id, coalesce(e.checkout_id, '')
	FROM stock_events e JOIN skus s ON s.id = e.sku_id JOIN locations l ON l.id = e.location_id
	WHERE e.seq > p_after ORDER BY e.seq LIMIT p_limit;
END
$fn$;
-- +goose StatementEnd
DROP FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]);
DROP FUNCTION inventory_reserve_batch_lock(text[], text[]);
-- +goose StatementBegin
CREATE FUNCTION inventory_reserve_batch_lock(p_skus text[], p_locs text[])
RETURNS TABLE (sku_id bigint, location_id bigint, sku_code text, location_code text, kind text,
               on_hand integer, reserved integer, preorderable integer)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	SELECT b.sku_id, b.location_id, s.code, l.code, s.kind, b.on_hand, b.reserved, b.pending_supply - b.preordered
	FROM (SELECT DISTINCT sku, loc FROM unnest(p_skus, p_locs) AS i(sku, loc)) i
	JOIN skus s ON s.code = i.sku JOIN locations l ON l.code = i.loc
	JOIN balances b ON b.sku_id = s.id AND b.location_id = l.id
	ORDER BY b.sku_id, b.location_id
	FOR NO KEY UPDATE OF b;
END
$fn$;
-- +goose StatementEnd

-- What the batch granted, in one statement: each balance raised once, per
-- hold its line, ledger row, stock event and (CODES) its codes marked held;
-- the refused rows deleted and the out-of-stock ones counted. Returns how
-- many codes it claimed.
-- +goose StatementBegin
CREATE FUNCTION inventory_reserve_batch_apply(
	bal_sku bigint[], bal_loc bigint[], bal_delta integer[],
	hold_id uuid[], hold_checkout text[], hold_actor text[], hold_sku bigint[], hold_loc bigint[],
	hold_q integer[], hold_on_hand integer[], hold_reserved integer[],
	gone uuid[], failed_checkouts text[], failed_skus bigint[], hold_codes boolean[])
RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
	claimed_n bigint;
BEGIN
	WITH b AS (
		UPDATE balances b SET reserved = b.reserved + d.q, updated_at = now()
		FROM unnest(bal_sku, bal_loc, bal_delta) AS d(sku, loc, q)
		WHERE b.sku_id = d.sku AND b.location_id = d.loc
	), h AS (
		SELECT * FROM unnest(hold_id, hold_checkout, hold_actor, hold_sku, hold_loc, hold_q, hold_on_hand, hold_reserved, hold_codes)
		         WITH ORDINALITY AS h(id, checkout, actor, sku, loc, q, on_hand, reserved, codes, ord)
	), lines AS (
		INSERT INTO reservation_lines (reservation_id, line_no, sku_id, location_id, quantity, preorder_quantity)
		SELECT h.id, 0, h.sku, h.loc, h.q, 0 FROM h
		RETURNING reservation_lines.id, reservation_lines.reservation_id
	), ledger AS (
		INSERT INTO stock_movements (sku_id, location_id, reserved_delta, cause, actor, reservation_id)
		SELECT h.sku, h.loc, h.q, 'reserved', h.actor, h.id FROM h ORDER BY h.ord
	), events AS (
		INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved, reservation_id, checkout_id)
		SELECT h.sku, h.loc, 'reserved', h.on_hand, h.reserved, h.id, h.checkout FROM h ORDER BY h.ord
	), failures AS (
		INSERT INTO allocation_failures (checkout_id, sku_id) SELECT * FROM unnest(failed_checkouts, failed_skus)
	), refused AS (
		DELETE FROM reservations WHERE reservations.id = ANY(gone)
	), code_holds AS (
		SELECT h.id, h.sku, h.loc, h.q, sum(h.q) OVER (PARTITION BY h.sku, h.loc ORDER BY h.ord) - h.q AS first_unit
		FROM h WHERE h.codes
	), picked AS (
		SELECT c.id, d.sku, d.loc, row_number() OVER (PARTITION BY d.sku, d.loc ORDER BY c.batch_id, c.id) - 1 AS unit
		FROM (SELECT code_holds.sku, code_holds.loc, sum(code_holds.q) AS n FROM code_holds GROUP BY code_holds.sku, code_holds.loc) d
		CROSS JOIN LATERAL (
			SELECT codes.id, codes.batch_id FROM codes
			WHERE codes.sku_id = d.sku AND codes.location_id = d.loc AND codes.status = 'available'
			ORDER BY codes.batch_id, codes.id LIMIT d.n
			FOR NO KEY UPDATE SKIP LOCKED) c
	), claimed AS (
		UPDATE codes SET status = 'held', reservation_line_id = lines.id, updated_at = now()
		FROM picked
		JOIN code_holds ch ON ch.sku = picked.sku AND ch.loc = picked.loc
		     AND picked.unit >= ch.first_unit AND picked.unit < ch.first_unit + ch.q
		JOIN lines ON lines.reservation_id = ch.id
		WHERE codes.id = picked.id
		RETURNING 1
	)
	SELECT count(*) INTO claimed_n FROM claimed;
	RETURN claimed_n;
END
$fn$;
-- +goose StatementEnd
ALTER FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION inventory_reserve_batch_lock(text[], text[]) SET plan_cache_mode = force_generic_plan;
ALTER TABLE stock_events DROP COLUMN order_action_id;
DROP TABLE order_actions;
ALTER TABLE codes DROP CONSTRAINT codes_void_check, DROP CONSTRAINT codes_status_check,
    ADD CONSTRAINT codes_status_check CHECK (status IN ('available', 'held', 'sold'));
DROP INDEX order_lines_unshipped_idx;
ALTER TABLE order_lines DROP CONSTRAINT order_lines_open_check, DROP COLUMN commits, DROP COLUMN cancelled, DROP COLUMN fulfilled;
ALTER TABLE stock_events DROP CONSTRAINT stock_events_cause_check, DROP COLUMN committed,
    ADD CONSTRAINT stock_events_cause_check CHECK (cause IN ('received', 'adjusted', 'reserved', 'confirmed', 'released',
        'expired', 'imported', 'preorder_allocated'));
ALTER TABLE stock_movements DROP CONSTRAINT stock_movements_cause_check, DROP COLUMN committed_delta,
    ADD CONSTRAINT stock_movements_cause_check CHECK (cause IN (
        'received', 'adjusted', 'reserved', 'confirmed', 'released', 'expired',
        'imported', 'preorder_set', 'preorder_allocated'));
ALTER TABLE balances DROP CONSTRAINT balances_check, DROP COLUMN committed,
    ADD CONSTRAINT balances_check CHECK (reserved >= 0 AND reserved <= on_hand);
ALTER TABLE locations DROP COLUMN fulfillment;
