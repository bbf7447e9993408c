package store_test

import (
	"fmt"
	"slices"
	"testing"

	"inventory/domain"
)

// TestComputedPagesResumeAfterAnyPosition: the two connections over
// computed lists (reconciliation issues, waitlist lines) continue strictly
// after a position whether or not a row still sits at it — a cursor's row
// may have been fixed or have left the line since its page was read — and
// say whether more follow.
func TestComputedPagesResumeAfterAnyPosition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, sku := range []string{"RA", "RB", "RC"} {
		b.Stock(t, sku, "L1", 2)
	}
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE balances SET on_hand = on_hand + 1`); err != nil {
		t.Fatal(err)
	}
	skus := func(issues []domain.ReconciliationIssue) (out []string) {
		for _, i := range issues {
			out = append(out, i.SKU)
		}
		return out
	}
	for _, c := range []struct {
		after *domain.ReconciliationKey
		want  []string
		more  bool
	}{
		{nil, []string{"RA", "RB"}, true},
		{&domain.ReconciliationKey{SKU: "RA", Location: "L1", Kind: "on_hand_ledger_mismatch", Detail: "on_hand is 3 but the ledger sums to 2"}, []string{"RB", "RC"}, false},
		{&domain.ReconciliationKey{SKU: "RA", Location: "L1", Kind: "zz"}, []string{"RB", "RC"}, false}, // no issue there now
		{&domain.ReconciliationKey{SKU: "RB"}, []string{"RB", "RC"}, false},                             // before RB's issue
		{&domain.ReconciliationKey{SKU: "RZ"}, nil, false},
	} {
		page, err := b.Store.ReconciliationPage(b.Ctx, c.after, 2)
		if err != nil || !slices.Equal(skus(page.Items), c.want) || page.More != c.more {
			t.Errorf("after %+v: %v more %v (%v); want %v more %v", c.after, skus(page.Items), page.More, err, c.want, c.more)
		}
	}

	// Lines of 3, 2, 2 and 1 waiting.
	for i, n := range []int{3, 2, 2, 1} {
		sku := fmt.Sprintf("W%d", i)
		b.Stock(t, sku, "L1", 0)
		for j := range n {
			b.mustJoin(t, fmt.Sprintf("%s-%d", sku, j), "k", sku, "", 1)
		}
	}
	lines := func(after *domain.WaitlistLineKey) string {
		page, err := b.Store.WaitlistLinesPage(b.Ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		for _, l := range page.Items {
			out += fmt.Sprintf("%s:%d ", l.SKU, l.Waiting)
		}
		return fmt.Sprintf("%smore=%v", out, page.More)
	}
	for _, c := range []struct {
		after *domain.WaitlistLineKey
		want  string
	}{
		{nil, "W0:3 W1:2 more=true"},
		{&domain.WaitlistLineKey{Waiting: 2, SKU: "W1"}, "W2:2 W3:1 more=false"},
		{&domain.WaitlistLineKey{Waiting: 3, SKU: "W9"}, "W1:2 W2:2 more=true"}, // W9 waits no more
		{&domain.WaitlistLineKey{Waiting: 1, SKU: "W3"}, "more=false"},
	} {
		if got := lines(c.after); got != c.want {
			t.Errorf("lines after %+v: %q, want %q", c.after, got, c.want)
		}
	}
	for _, first := range []int{0, domain.MaxWaitlistLines + 1} {
		if _, err := b.Store.WaitlistLinesPage(b.Ctx, nil, first); !isLimit(err) {
			t.Errorf("first %d: %v, want BAD_REQUEST", first, err)
		}
	}
}
