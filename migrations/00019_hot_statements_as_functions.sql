-- +goose Up

-- The statements run for every reserve batch and every instance's fetch of
-- new events, as functions. Through a transaction pooler (PgBouncer < 1.21)
-- the server sends every statement unprepared, so PostgreSQL planned them
-- afresh each time: 2 ms each for the batch's two biggest, 0.5-1 ms for the
-- others, a third of the primary's CPU with three instances behind
-- PgBouncer (pg_stat_statements with track_planning). PL/pgSQL keeps the
-- plans of the statements in a function for the life of the server
-- connection, which PgBouncer lends again and again, so they are planned a
-- few times per connection, as a prepared statement is on a direct
-- connection (plan_cache_mode's default: custom plans for the first five
-- calls, then the generic plan unless it looks costlier).
--
-- Every one keeps that default, though the planner still judges some
-- calls' arrays worth a custom plan (the batch's apply, the fair-use read:
-- 0.25-0.45 ms of planning per call): a generic plan forced on them, made
-- while reservations is nearly empty (a new database, just analyzed),
-- scanned it whole until the next ANALYZE — 16-23 ms a batch in one bench
-- run. (The foreign-key checks PostgreSQL itself caches have the same
-- weakness there: 0.4 ms per hold in that run.)
--
-- The statements are exactly what store/ describes (queueBatchBalances,
-- applyBatchHolds, queueCheckoutUsage, AvailabilitySupply,
-- stockEventsAfter); their callers are there.

-- The batch's balance rows, locked in (sku, location) order, with what they
-- can grant.
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

-- The live holds of the checkouts a batch's fair-use limits bind.
-- +goose StatementBegin
CREATE FUNCTION inventory_checkout_holds(p_checkouts text[])
RETURNS TABLE (checkout_id text, reservation_id uuid, sku_id bigint, quantity integer)
LANGUAGE plpgsql AS $fn$
BEGIN
	RETURN QUERY
	SELECT r.checkout_id, r.id, l.sku_id, l.quantity
	FROM reservations r
	JOIN reservation_lines l ON l.reservation_id = r.id
	WHERE r.checkout_id = ANY(p_checkouts) AND r.status = 'held' AND r.expires_at > clock_timestamp();
END
$fn$;
-- +goose StatementEnd

-- Pending supply and pre-ordered counts of balances, by codes (the
-- availability copy's, after applying their events).
-- +goose StatementBegin
CREATE FUNCTION inventory_availability_supply(p_skus text[], p_locs text[])
RETURNS TABLE (sku text, location text, pending_supply integer, preordered integer, updated_at timestamptz)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
	RETURN QUERY
	SELECT s.code, l.code, b.pending_supply, b.preordered, b.updated_at
	FROM unnest(p_skus, p_locs) AS u(s, l)
	JOIN skus s ON s.code = u.s JOIN locations l ON l.code = u.l
	JOIN balances b ON b.sku_id = s.id AND b.location_id = l.id;
END
$fn$;
-- +goose StatementEnd

-- Published events after a seq, in order (a fetch's or a catch-up's).
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

-- +goose Down
DROP FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]);
DROP FUNCTION inventory_reserve_batch_lock(text[], text[]);
DROP FUNCTION inventory_checkout_holds(text[]);
DROP FUNCTION inventory_availability_supply(text[], text[]);
DROP FUNCTION inventory_stock_events_after(bigint, integer);
