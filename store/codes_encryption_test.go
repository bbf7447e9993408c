package store_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
	"inventory/domain"
)

// requireNoPlaintext searches the whole database for code: in the code
// rows' ciphertext (as bytes and as escaped text), in every table's rows as
// text (also in the normalized form), and in every bytea column.
func (b *testBundle) requireNoPlaintext(t *testing.T, code string) {
	t.Helper()
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE position($1::bytea in ciphertext) > 0 OR encode(ciphertext, 'escape') LIKE '%'||$2||'%'`,
		[]byte(code), code); n != 0 {
		t.Fatalf("%q found in %d ciphertexts", code, n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c WHERE c::text LIKE '%'||$1||'%'`, code); n != 0 {
		t.Fatalf("%q found in %d code rows", code, n)
	}
	for _, table := range []string{"code_batches", "code_reveals", "stock_movements", "reservations", "reservation_lines", "orders", "order_lines"} {
		if n := b.sqlInt(t, `SELECT count(*) FROM `+table+` x WHERE x::text ILIKE '%'||$1||'%' OR x::text ILIKE '%'||$2||'%'`,
			code, codecrypt.Normalize(code)); n != 0 {
			t.Fatalf("%q found in %d rows of %s", code, n, table)
		}
	}
	// Every table and every bytea column there is, whatever is added later.
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables found: %q", len(tables), tables)
	}
	for _, table := range tables {
		if n := b.sqlInt(t, `SELECT count(*) FROM `+table+` x WHERE x::text ILIKE '%'||$1||'%' OR x::text ILIKE '%'||$2||'%'`,
			code, codecrypt.Normalize(code)); n != 0 {
			t.Fatalf("%q found in %d rows of %s", code, n, table)
		}
	}
	rows, err = b.Pool.Query(b.Ctx, `
		SELECT format('%I.%I', table_schema, table_name), quote_ident(column_name) FROM information_schema.columns
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND data_type = 'bytea'`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ table, name string }
	columns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.table, &c.name)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range columns {
		for _, form := range []string{code, codecrypt.Normalize(code), strings.ToLower(code)} {
			if n := b.sqlInt(t, `SELECT count(*) FROM `+c.table+` WHERE position($1::bytea in `+c.name+`) > 0`, []byte(form)); n != 0 {
				t.Fatalf("%q found in %d values of %s.%s", form, n, c.table, c.name)
			}
		}
	}
}

// No code is stored in plaintext anywhere: not in the code rows, nor in the
// batches, the ledger, the reservations, the orders or the reveal records.
func TestCodesEncryptedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	secrets := []string{"ZQXJ-SECRET-7788", "WKVY-PRIVATE-4411", "plain-lower-zqxj-9"}
	b.codesImport(t, "GC", "AMS", "B-1", secrets...)
	for _, s := range secrets {
		b.requireNoPlaintext(t, s)
	}
	// After they moved through every state and were revealed, still none.
	sold := b.mustCreate(t, "cart-1", "k1", 600, line("GC", "AMS", 2))
	ol := orderLineOf(t, b.codesConfirm(t, sold.ID, "ORD-1"))
	if got := b.codesReveal(t, ol.ID); strings.Join(got, "|") != "ZQXJ-SECRET-7788|WKVY-PRIVATE-4411" {
		t.Fatalf("revealed %q", got)
	}
	b.mustCreate(t, "cart-2", "k2", 600, line("GC", "AMS", 1)) // held
	if n := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status IN ('held', 'sold') AND key_id = 'k1' AND length(ciphertext) > 12`); n != 3 {
		t.Fatalf("%d sealed codes held or sold, want 3", n)
	}
	for _, s := range secrets {
		b.requireNoPlaintext(t, s)
	}
	// Sealing is randomized: the same code sealed twice differs.
	k := b.Store.Keyring
	c1, _ := k.Seal(1, "SAME")
	c2, _ := k.Seal(1, "SAME")
	if string(c1) == string(c2) {
		t.Fatal("two seals of one code are equal")
	}
	// A ciphertext moved to another SKU does not open: the SKU is bound in.
	var skuID int64
	var keyID string
	var sealed []byte
	if err := b.Pool.QueryRow(b.Ctx, `SELECT sku_id, key_id, ciphertext FROM codes ORDER BY id LIMIT 1`).Scan(&skuID, &keyID, &sealed); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(skuID, keyID, sealed); err != nil || got != secrets[0] {
		t.Fatalf("open: %q %v", got, err)
	}
	if got, err := k.Open(skuID+1, keyID, sealed); err == nil {
		t.Fatalf("a ciphertext opened under another SKU: %q", got)
	}
}

// Key rotation: a ring with a new current key and the old one still opens
// the old codes, seals new ones with the new key, and keeps deduplicating
// across both; CodesKeyCheck accepts the right keys and refuses wrong ones.
func TestCodesKeyRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k1, k2, hmacKey := codecrypt.NewKey(), codecrypt.NewKey(), codecrypt.NewKey()
	ring := func(keys, hmac string) *codecrypt.Keyring {
		t.Helper()
		k, err := codecrypt.ParseKeyring(keys, hmac)
		if err != nil {
			t.Fatalf("ParseKeyring(%q): %v", keys, err)
		}
		return k
	}
	b.codesSKU(t, "GC", "AMS")
	// No codes yet: any keys pass the check.
	b.Store.Keyring = ring("k9:"+codecrypt.NewKey(), codecrypt.NewKey())
	if err := b.Store.CodesKeyCheck(b.Ctx); err != nil {
		t.Fatalf("key check on an empty table: %v", err)
	}

	b.Store.Keyring = ring("k1:"+k1, hmacKey)
	b.codesImport(t, "GC", "AMS", "B-OLD", "OLD-0001", "OLD-0002", "OLD-0003")
	early := b.mustCreate(t, "cart-1", "k", 600, line("GC", "AMS", 1))
	earlyLine := orderLineOf(t, b.codesConfirm(t, early.ID, "ORD-1"))
	if err := b.Store.CodesKeyCheck(b.Ctx); err != nil {
		t.Fatalf("key check with the import's keys: %v", err)
	}

	// Rotate: k2 seals new codes, k1 still opens the old ones.
	rotated := ring("k2:"+k2+",k1:"+k1, hmacKey)
	b.Store.Keyring = rotated
	if got := b.codesReveal(t, earlyLine.ID); len(got) != 1 || got[0] != "OLD-0001" {
		t.Fatalf("old code after rotation: %q", got)
	}
	batch := b.codesImport(t, "GC", "AMS", "B-NEW", "NEW-0001", "NEW-0002", "old 0002")
	if batch.Inserted != 2 || batch.Duplicates != 1 {
		t.Fatalf("import after rotation (one code already stored under k1): %+v", batch)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN code_batches cb ON cb.id = c.batch_id WHERE cb.batch_ref = 'B-NEW' AND c.key_id = 'k2'`); n != 2 {
		t.Fatalf("%d new codes under k2, want 2", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN code_batches cb ON cb.id = c.batch_id WHERE cb.batch_ref = 'B-OLD' AND c.key_id = 'k1'`); n != 3 {
		t.Fatalf("%d old codes still under k1, want 3", n)
	}
	// A basket that sells codes of both keys reveals both.
	late := b.mustCreate(t, "cart-2", "k", 600, line("GC", "AMS", 4))
	lateLine := orderLineOf(t, b.codesConfirm(t, late.ID, "ORD-2"))
	if got := b.codesReveal(t, lateLine.ID); strings.Join(got, "|") != "OLD-0002|OLD-0003|NEW-0001|NEW-0002" {
		t.Fatalf("codes of both keys: %q", got)
	}
	if err := b.Store.CodesKeyCheck(b.Ctx); err != nil {
		t.Fatalf("key check after rotation: %v", err)
	}

	for _, bad := range []struct {
		what string
		ring *codecrypt.Keyring
	}{
		{"another key under the id k1", ring("k2:"+k2+",k1:"+codecrypt.NewKey(), hmacKey)},
		{"another key under the id k2", ring("k2:"+codecrypt.NewKey()+",k1:"+k1, hmacKey)},
		{"k1, still in use, missing", ring("k2:"+k2, hmacKey)},
		{"k2, in use, missing", ring("k1:"+k1, hmacKey)},
		{"another HMAC key", ring("k2:"+k2+",k1:"+k1, codecrypt.NewKey())},
		{"the keys swapped between ids", ring("k2:"+k1+",k1:"+k2, hmacKey)},
	} {
		b.Store.Keyring = bad.ring
		if err := b.Store.CodesKeyCheck(b.Ctx); err == nil {
			t.Errorf("CodesKeyCheck passed with %s", bad.what)
		} else {
			t.Logf("%s: %v", bad.what, err)
		}
	}
	b.Store.Keyring = nil
	if err := b.Store.CodesKeyCheck(b.Ctx); err == nil {
		t.Error("CodesKeyCheck passed without keys while codes are stored")
	}
	// A reveal with a wrong key is an error, never garbage, and records
	// nothing.
	reveals := b.sqlInt(t, `SELECT count(*) FROM code_reveals`)
	b.Store.Keyring = ring("k2:"+k2+",k1:"+codecrypt.NewKey(), hmacKey)
	if got, err := b.Store.CodesReveal(b.Ctx, domain.Scope{}, earlyLine.ID); err == nil {
		t.Fatalf("reveal with a wrong k1 returned %q", got)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM code_reveals`); n != reveals {
		t.Fatalf("a failed reveal was recorded: %d -> %d", reveals, n)
	}
	b.Store.Keyring = rotated
	b.requireCodeInvariants(t)
}
