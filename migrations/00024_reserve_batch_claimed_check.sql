-- +goose Up

-- A reserve batch's apply and its COMMIT now travel together (one round
-- trip), so its check that the codes it claimed are the codes it counted
-- available must stop the COMMIT from the database's side: an error here
-- aborts the transaction, and the pipelined COMMIT behind it is never run.
-- +goose StatementBegin
CREATE FUNCTION inventory_expect_count(p_got bigint, p_want bigint, p_what text)
RETURNS bigint
LANGUAGE plpgsql AS $fn$
BEGIN
	IF p_got <> p_want THEN
		RAISE EXCEPTION '% out of step: % where % were expected', p_what, p_got, p_want;
	END IF;
	RETURN p_got;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION inventory_expect_count(bigint, bigint, text);
