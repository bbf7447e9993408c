package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"inventory/codefile"
	"inventory/domain"
	"inventory/testkit"
)

// importState is everything an import may change: balances and ledger (via
// state), the batches, and the code rows.
type importState struct {
	db      dbState
	batches string
	codes   string
}

func (b *testBundle) importState(t *testing.T) importState {
	t.Helper()
	s := importState{db: b.state(t)}
	if err := b.Pool.QueryRow(b.Ctx, `
		SELECT coalesce((SELECT string_agg(cb::text, ';' ORDER BY id) FROM code_batches cb), ''),
		       coalesce((SELECT string_agg(c::text, ';' ORDER BY id) FROM codes c), '')`).Scan(&s.batches, &s.codes); err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *testBundle) requireImportUnchanged(t *testing.T, before importState, what string) {
	t.Helper()
	b.requireUnchanged(t, before.db, what)
	if after := b.importState(t); after != before {
		t.Fatalf("%s changed code batches or codes:\nbatches %q\n     -> %q\ncodes %d chars -> %d chars", what, before.batches, after.batches, len(before.codes), len(after.codes))
	}
}

// Counting: within-file duplicates (also by case, spaces and hyphens),
// duplicates of stored codes, blank and malformed lines; a re-import of a
// batch; the CSV form; refusals that change nothing.
func TestCodesImportCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	b.Stock(t, "QS", "AMS", 0)

	file := strings.Join([]string{
		"ABCD-EFGH-0001",         // inserted
		"abcd efgh 0001",         // duplicate: same code in other case, spaces for hyphens
		"ABCDEFGH0001",           // duplicate: without hyphens
		"  Abcd-Efgh-0002  ",     // inserted, stored trimmed
		"",                       // rejected: blank
		"   \t ",                 // rejected: blank
		"AB\x01CD-0003",          // rejected: control character
		"ZZ\x7fQQ-0004",          // rejected: DEL
		strings.Repeat("X", 129), // rejected: longer than 128 characters
		strings.Repeat("Y", 128), // inserted: 128 characters is the maximum
		" - - ",                  // rejected: only separators
		"ABCD-EFGH-0002",         // duplicate of the trimmed line above
		"ABCD-EFGH-0001",         // duplicate, exactly
	}, "\n")
	first, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-1"}, codefile.Lines(strings.NewReader(file)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (domain.CodeBatch{BatchRef: "B-1", Received: 13, Inserted: 3, Duplicates: 4, Rejected: 6}); first != want {
		t.Fatalf("import: %+v, want %+v", first, want)
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 3}, "after the first import")
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN code_batches cb ON cb.id = c.batch_id
		WHERE cb.batch_ref = 'B-1' AND c.status = 'available' AND c.key_id = 'k1'`); n != 3 {
		t.Fatalf("%d code rows for B-1, want 3", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM code_batches WHERE batch_ref = 'B-1' AND received = 13 AND inserted = 3
		AND duplicates = 4 AND rejected = 6 AND preorders_filled = 0 AND actor = 'test-admin'`); n != 1 {
		t.Fatalf("batch row for B-1 does not hold the counts")
	}
	ms := movementsOf(t, b, "GC", "AMS")
	if len(ms) != 1 || ms[0].OnHandDelta != 3 || ms[0].ReservedDelta != 0 || ms[0].Cause != "imported" ||
		deref(ms[0].Reference) != "batch B-1" || ms[0].Actor != "test-admin" {
		t.Fatalf("ledger after import: %+v", ms)
	}

	// Against stored codes: duplicates, counted, whatever their form.
	second := b.codesImport(t, "GC", "AMS", "B-2", "abcd-efgh-0001", "NEW-0005", "new 0005", "ABCD EFGH 0002", strings.Repeat("y", 128))
	if want := (domain.CodeBatch{BatchRef: "B-2", Received: 5, Inserted: 1, Duplicates: 4}); second != want {
		t.Fatalf("second import: %+v, want %+v", second, want)
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 4}, "after the second import")

	// The same batch again, even with other content: the first result,
	// nothing inserted, nothing changed.
	before := b.importState(t)
	for _, lines := range [][]string{{"TOTALLY-NEW-0001", "TOTALLY-NEW-0002"}, {}} {
		again, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-1"}, codefile.List(lines))
		if err != nil || again != first {
			t.Fatalf("re-import of B-1 with %q: %+v %v, want %+v", lines, again, err, first)
		}
	}
	b.requireImportUnchanged(t, before, "re-importing B-1")

	// CSV with a header (any case, quoted): the header is not a line; the
	// code is the first field; a line that is not CSV is rejected.
	csv := "\"Code\",pin\n\"WXYZ-0001\",1234\nWXYZ-0002,5678\nwxyz-0001,9999\n\"broken,1\n"
	got, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-CSV"}, codefile.Lines(strings.NewReader(csv)))
	if want := (domain.CodeBatch{BatchRef: "B-CSV", Received: 4, Inserted: 2, Duplicates: 1, Rejected: 1}); err != nil || got != want {
		t.Fatalf("CSV import: %+v %v, want %+v", got, err, want)
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 6}, "after the CSV import")

	// Refusals change nothing.
	before = b.importState(t)
	for _, c := range []struct {
		in   domain.ImportCodesInput
		code domain.ErrorCode
	}{
		{domain.ImportCodesInput{SKU: "QS", Location: "AMS", BatchRef: "B-Q"}, domain.CodeInvalidInput},
		{domain.ImportCodesInput{SKU: "NOPE", Location: "AMS", BatchRef: "B-X"}, domain.CodeUnknownSKU},
		{domain.ImportCodesInput{SKU: "GC", Location: "NOWHERE", BatchRef: "B-X"}, domain.CodeUnknownLocation},
		{domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: ""}, domain.CodeInvalidInput},
		{domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: strings.Repeat("r", 129)}, domain.CodeInvalidInput},
	} {
		_, err := b.Store.CodesImport(b.Ctx, c.in, codefile.List([]string{"REFUSED-0001"}))
		e := requireCode(t, err, c.code)
		if c.code == domain.CodeInvalidInput && c.in.SKU == "QS" && (e.SKU != "QS" || !strings.Contains(e.Message, "QUANTITY")) {
			t.Fatalf("QUANTITY SKU refusal: %+v", e)
		}
	}
	b.requireImportUnchanged(t, before, "refused imports")

	// A file that cannot be read to its end changes nothing, and its batch
	// reference stays free.
	// The caller is told why, as INVALID_INPUT naming the file (the error
	// stagingSource builds); checked after the database, so that both are
	// reported.
	_, err = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-ERR"},
		codesThenError(errors.New("disk on fire"), "ERR-0001", "ERR-0002", "ERR-0003"))
	tooLong := "LONG-0001\n" + strings.Repeat("L", codefile.MaxLineBytes+1) + "\nLONG-0002\n"
	_, tooLongErr := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-ERR"}, codefile.Lines(strings.NewReader(tooLong)))
	b.requireImportUnchanged(t, before, "imports whose file broke off")
	for _, c := range []struct {
		what, message string
		err           error
	}{{"an unreadable file", "disk on fire", err}, {"a line over 64 KiB", "longer than", tooLongErr}} {
		if e, ok := domain.AsError(c.err); !ok || e.Code != domain.CodeInvalidInput || !strings.Contains(e.Message, c.message) ||
			len(e.Field) != 2 || e.Field[1] != "file" {
			t.Errorf("import of %s: want an INVALID_INPUT error on input.file saying %q, got %v", c.what, c.message, c.err)
		}
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM code_batches WHERE batch_ref = 'B-ERR'`); n != 0 {
		t.Fatalf("%d batch rows for the failed import", n)
	}
	if got := b.codesImport(t, "GC", "AMS", "B-ERR", "ERR-0001", "ERR-0002"); got.Inserted != 2 || got.Received != 2 {
		t.Fatalf("retry of the failed batch: %+v", got)
	}

	// Without keys: an error, and nothing changes.
	before = b.importState(t)
	bare := testkit.NewStore(t, b.Pool)
	if _, err := bare.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-NOKEY"}, codefile.List([]string{"NOKEY-0001"})); err == nil {
		t.Fatal("import without a keyring succeeded")
	}
	b.requireImportUnchanged(t, before, "an import without keys")

	// What is stored is the first occurrence, trimmed: sold in claim order
	// (batch, then line), the codes read back as they were in the files.
	res := b.mustCreate(t, "cart-1", "k", 600, line("GC", "AMS", 8))
	ol := orderLineOf(t, b.codesConfirm(t, res.ID, "ORD-1"))
	want := []string{"ABCD-EFGH-0001", "Abcd-Efgh-0002", strings.Repeat("Y", 128), "NEW-0005", "WXYZ-0001", "WXYZ-0002", "ERR-0001", "ERR-0002"}
	if got := b.codesReveal(t, ol.ID); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("revealed %q, want %q", got, want)
	}
	b.requireCodeInvariants(t)
}

// An import never touches held or sold codes: a batch that contains them
// counts them as duplicates and leaves their rows as they were.
func TestCodesImportLeavesHeldAndSoldCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	b.codesImport(t, "GC", "AMS", "B-1", "HELD-0001", "SOLD-0002", "FREE-0003")
	held := b.mustCreate(t, "cart-h", "k", 600, line("GC", "AMS", 1))
	sold := b.mustCreate(t, "cart-s", "k", 600, line("GC", "AMS", 1))
	ol := orderLineOf(t, b.codesConfirm(t, sold.ID, "ORD-S"))
	rowsBefore := b.codeRowsText(t, "GC")
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 2, Reserved: 1}, "before")

	got := b.codesImport(t, "GC", "AMS", "B-2", "held 0001", "sold-0002", "Free-0003", "NEW-0004")
	if want := (domain.CodeBatch{BatchRef: "B-2", Received: 4, Inserted: 1, Duplicates: 3}); got != want {
		t.Fatalf("import: %+v, want %+v", got, want)
	}
	rowsAfter := b.codeRowsText(t, "GC")
	for id, before := range rowsBefore {
		if rowsAfter[id] != before {
			t.Fatalf("code %d changed: %s -> %s", id, before, rowsAfter[id])
		}
	}
	if len(rowsAfter) != 4 {
		t.Fatalf("%d code rows, want 4", len(rowsAfter))
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 3, Reserved: 1}, "after")
	if n := b.sqlInt(t, `SELECT count(*) FROM codes c JOIN reservation_lines rl ON rl.id = c.reservation_line_id
		WHERE c.status = 'held' AND rl.reservation_id = $1`, held.ID); n != 1 {
		t.Fatalf("%d codes held by %s, want 1", n, held.ID)
	}
	if codes, err := b.Store.CodesReveal(checkoutCtx("cart-s"), domain.Scope{CheckoutID: "cart-s"}, ol.ID); err != nil || len(codes) != 1 || codes[0] != "SOLD-0002" {
		t.Fatalf("reveal of the sold code: %q %v", codes, err)
	}
	// The held code is the one the new batch repeated; released, it is sold
	// to the next buyer once, not twice.
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: held.ID, Reason: domain.ReasonOther}); err != nil {
		t.Fatal(err)
	}
	next := b.mustCreate(t, "cart-n", "k", 600, line("GC", "AMS", 3))
	nl := orderLineOf(t, b.codesConfirm(t, next.ID, "ORD-N"))
	if got := b.codesReveal(t, nl.ID); strings.Join(got, "|") != "HELD-0001|FREE-0003|NEW-0004" {
		t.Fatalf("next buyer got %q", got)
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{}, "sold out")
	b.requireCodeInvariants(t)
}

// The same batch imported by several callers at once is imported once; every
// caller gets the same counts.
func TestCodesImportSameBatchConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	codes := make([]string, 500)
	for i := range codes {
		codes[i] = codeName("SAME", i)
	}
	const callers = 6
	results := make([]domain.CodeBatch, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-SAME"}, codefile.List(codes))
		})
	}
	close(start)
	wg.Wait()
	want := domain.CodeBatch{BatchRef: "B-SAME", Received: 500, Inserted: 500}
	for i := range callers {
		if errs[i] != nil || results[i] != want {
			t.Fatalf("caller %d: %+v %v, want %+v", i, results[i], errs[i], want)
		}
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 500}, "after the concurrent imports")
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_movements WHERE cause = 'imported'`); n != 1 {
		t.Fatalf("%d import ledger rows, want 1", n)
	}
	b.requireCodeInvariants(t)
}

// 100,000 codes in one import, read from a file: timed.
func TestCodesImport100k(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	const n = 100_000
	var buf bytes.Buffer
	buf.WriteString("code\n")
	for i := range n {
		fmt.Fprintf(&buf, "BULK-%08d-ZQXW\n", i)
	}
	size := buf.Len()
	started := time.Now()
	batch, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: "B-100K"}, codefile.Lines(&buf))
	elapsed := time.Since(started)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %d codes (%d KiB file) in %s: %.0f codes/s", batch.Inserted, size>>10, elapsed.Round(time.Millisecond), float64(batch.Inserted)/elapsed.Seconds())
	if want := (domain.CodeBatch{BatchRef: "B-100K", Received: n, Inserted: n}); batch != want {
		t.Fatalf("import: %+v, want %+v", batch, want)
	}
	if elapsed > 60*time.Second {
		t.Fatalf("100,000 codes took %s, more than 60s", elapsed)
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: n}, "after the import")
	if rows := b.sqlInt(t, `SELECT count(*) FROM codes WHERE status = 'available'`); rows != n {
		t.Fatalf("%d code rows, want %d", rows, n)
	}
	// Claims still take the oldest codes, quickly.
	started = time.Now()
	res := b.mustCreate(t, "cart-1", "k", 600, line("GC", "AMS", 3))
	ol := orderLineOf(t, b.codesConfirm(t, res.ID, "ORD-1"))
	if got := b.codesReveal(t, ol.ID); strings.Join(got, "|") != "BULK-00000000-ZQXW|BULK-00000001-ZQXW|BULK-00000002-ZQXW" {
		t.Fatalf("first codes sold: %q", got)
	}
	t.Logf("reserve, confirm and reveal of 3 codes among 100,000: %s", time.Since(started).Round(time.Millisecond))
	b.requireCodeInvariants(t)
}
