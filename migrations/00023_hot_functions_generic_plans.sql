-- +goose Up

-- The reserve batch's lock and apply statements take arrays, whose lengths
-- a custom plan is made for on every call: PL/pgSQL's plan cache found the
-- custom plan cheaper than the generic one each time and planned again,
-- which cost more than executing the statement. Their shape does not depend
-- on the batch's size (index lookups per element, up to 256 elements), so
-- each session plans them once.
ALTER FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION inventory_reserve_batch_lock(text[], text[]) SET plan_cache_mode = force_generic_plan;

-- A batch's fair-use read looks up the live holds of each checkout by the
-- checkout's own index entries. Written as a join on the array, a plan made
-- while the table was small (the first calls after a deploy) scanned every
-- held reservation and filtered by checkout, so each batch cost in
-- proportion to all live holds; the lateral lookup cannot be flattened
-- into that join (OFFSET 0), so its one plan is an index lookup per
-- checkout whatever the statistics said when it was made.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION inventory_checkout_holds(p_checkouts text[])
RETURNS TABLE (checkout_id text, reservation_id uuid, sku_id bigint, quantity integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
	RETURN QUERY
	SELECT r.checkout_id, r.id, l.sku_id, l.quantity
	FROM unnest(p_checkouts) AS c(id)
	CROSS JOIN LATERAL (
		SELECT r.checkout_id, r.id FROM reservations r
		WHERE r.checkout_id = c.id AND r.status = 'held' AND r.expires_at > clock_timestamp()
		OFFSET 0) r
	JOIN reservation_lines l ON l.reservation_id = r.id;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION inventory_checkout_holds(p_checkouts text[])
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
ALTER FUNCTION inventory_checkout_holds(text[]) RESET plan_cache_mode;
ALTER FUNCTION inventory_reserve_batch_apply(bigint[], bigint[], integer[], uuid[], text[], text[], bigint[], bigint[],
	integer[], integer[], integer[], uuid[], text[], bigint[], boolean[]) RESET plan_cache_mode;
ALTER FUNCTION inventory_reserve_batch_lock(text[], text[]) RESET plan_cache_mode;
