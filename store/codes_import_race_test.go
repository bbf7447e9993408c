package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"inventory/codefile"
	"inventory/domain"
)

// Imports racing the other writers of the same balance. An import is not
// retried (its lines are consumed once), so it must never lose a deadlock:
// each of these must finish without an error, and no deadlock may happen at
// all.

// A basket with two lines at one CODES balance, the second of which falls
// back to the locked capacity read, against imports into that balance.
func TestCodesImportRacesBasketOnSameBalance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	b.codesImport(t, "GC", "AMS", "B-0", codeName("START", 1), codeName("START", 2))
	deadlocksBefore := b.deadlocksSoFar(t)
	inserted := 2
	for round := range 60 {
		codes := make([]string, 50)
		for i := range codes {
			codes[i] = fmt.Sprintf("R%03d-%04d-ZQ", round, i)
		}
		var importErr, reserveErr error
		var batch domain.CodeBatch
		var wg sync.WaitGroup
		wg.Go(func() {
			batch, importErr = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: fmt.Sprintf("R%03d", round)}, codefile.List(codes))
		})
		wg.Go(func() {
			_, _, err := b.create(fmt.Sprintf("cart-%03d", round), "k", 600, line("GC", "AMS", 1), line("GC", "AMS", 1_000_000))
			reserveErr = allowedErr("reserve", err, domain.CodeOutOfStock)
			if err == nil {
				reserveErr = fmt.Errorf("a basket of 1,000,001 codes was reserved")
			}
		})
		wg.Wait()
		if importErr != nil || reserveErr != nil {
			t.Fatalf("round %d: import: %v; reserve: %v", round, importErr, reserveErr)
		}
		inserted += batch.Inserted
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: inserted}, "after the rounds")
	b.requireCodeInvariants(t)
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d", deadlocksBefore, after)
	}
}

// Concurrent imports into a balance with confirmed pre-orders waiting: each
// import allocates the codes it brings to the oldest pre-orders.
func TestCodesImportConcurrentWithPendingPreorders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	const preorders = 150
	b.preorderSet(t, "GC", "AMS", preorders)
	refs := make([]string, preorders)
	for i := range refs {
		r := b.mustCreate(t, fmt.Sprintf("cart-%03d", i), "k", 600, line("GC", "AMS", 1))
		refs[i] = fmt.Sprintf("ORD-%03d", i)
		b.codesConfirm(t, r.ID, refs[i])
	}
	deadlocksBefore := b.deadlocksSoFar(t)
	filled := 0
	const rounds, importers, codesEach = 20, 3, 2
	for round := range rounds {
		var wg sync.WaitGroup
		batches := make([]domain.CodeBatch, importers)
		errs := make([]error, importers)
		for j := range importers {
			wg.Go(func() {
				codes := make([]string, codesEach)
				for i := range codes {
					codes[i] = fmt.Sprintf("R%02d-%d-%d-ZQ", round, j, i)
				}
				batches[j], errs[j] = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: fmt.Sprintf("R%02d-%d", round, j)}, codefile.List(codes))
			})
		}
		wg.Wait()
		for j := range importers {
			if errs[j] != nil {
				t.Fatalf("round %d, importer %d: %v", round, j, errs[j])
			}
			if batches[j].Inserted != codesEach || batches[j].PreordersFilled != codesEach {
				t.Fatalf("round %d, importer %d: %+v", round, j, batches[j])
			}
			filled += batches[j].PreordersFilled
		}
	}
	// The oldest confirmed pre-orders were filled, in order.
	for i, ref := range refs {
		want := 0
		if i >= filled {
			want = 1
		}
		if ol := b.orderLine(t, ref); ol.PendingCodes != want {
			t.Fatalf("order %s: %d pending, want %d (%d filled)", ref, ol.PendingCodes, want, filled)
		}
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{PendingSupply: preorders - filled, Preordered: preorders - filled}, "after the imports")
	b.requireCodeInvariants(t)
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d", deadlocksBefore, after)
	}
}

// Two files with the same codes in different orders (a supplier's resend,
// under another batch reference) imported at once: every code is stocked
// once and counted once as a duplicate.
func TestCodesImportConcurrentOverlappingFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withCodesKeyring(t, b)
	b.codesSKU(t, "GC", "AMS")
	deadlocksBefore := b.deadlocksSoFar(t)
	const n = 2000
	for round := range 3 {
		codes := make([]string, n)
		for i := range codes {
			codes[i] = fmt.Sprintf("OV%d-%05d-ZQ", round, i)
		}
		reversed := slices.Clone(codes)
		slices.Reverse(reversed)
		var wg sync.WaitGroup
		var batches [2]domain.CodeBatch
		var errs [2]error
		start := make(chan struct{})
		for j, lines := range [][]string{codes, reversed} {
			wg.Go(func() {
				<-start
				batches[j], errs[j] = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "GC", Location: "AMS", BatchRef: fmt.Sprintf("OV%d-%d", round, j)}, codefile.List(lines))
			})
		}
		close(start)
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v / %v", round, errs[0], errs[1])
		}
		if batches[0].Inserted+batches[1].Inserted != n || batches[0].Duplicates+batches[1].Duplicates != n {
			t.Fatalf("round %d: %+v / %+v", round, batches[0], batches[1])
		}
	}
	b.requireFullBalance(t, "GC", "AMS", fullBalance{OnHand: 3 * n}, "after the imports")
	b.requireCodeInvariants(t)
	if after := b.deadlocksSoFar(t); after != deadlocksBefore {
		t.Fatalf("pg_stat_database.deadlocks went from %d to %d", deadlocksBefore, after)
	}
}
