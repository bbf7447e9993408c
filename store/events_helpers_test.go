package store_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// Helpers for the stock event tests. Their names start with evt so that they
// never collide with the helpers of other test files.

// evtRow is one stock_events row as stored, with the transaction that wrote
// it and the balance row it belongs to as it is now.
type evtRow struct {
	ID            int64
	Seq           *int64
	SKU, Location string
	Cause         string
	OnHand        int
	Reserved      int
	ReservationID *string
	CheckoutID    *string
	Xmin          string // the writing transaction (until the relay updates the row)
	BalanceXmin   string // the last transaction that changed the balance row
	BalanceOnHand int
	BalanceRes    int
}

func (r evtRow) String() string {
	seq := "NULL"
	if r.Seq != nil {
		seq = fmt.Sprint(*r.Seq)
	}
	return fmt.Sprintf("{id %d seq %s %s@%s %s on_hand %d reserved %d reservation %s checkout %s}",
		r.ID, seq, r.SKU, r.Location, r.Cause, r.OnHand, r.Reserved, evtOpt(r.ReservationID), evtOpt(r.CheckoutID))
}

func evtOpt(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// evtMaxID is the newest stock_events id (0 when there is none): the mark
// after which a call's events are read.
func (b *testBundle) evtMaxID(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := b.Pool.QueryRow(b.Ctx, `SELECT coalesce(max(id), 0) FROM stock_events`).Scan(&id); err != nil {
		t.Fatalf("reading max stock_events id: %v", err)
	}
	return id
}

// evtRowsAfter returns the stock_events rows with id > after, in id order.
func (b *testBundle) evtRowsAfter(t *testing.T, after int64) []evtRow {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `
		SELECT e.id, e.seq, s.code, l.code, e.cause, e.on_hand, e.reserved, e.reservation_id::text, e.checkout_id,
		       e.xmin::text, bal.xmin::text, bal.on_hand, bal.reserved
		FROM stock_events e
		JOIN skus s ON s.id = e.sku_id JOIN locations l ON l.id = e.location_id
		JOIN balances bal ON bal.sku_id = e.sku_id AND bal.location_id = e.location_id
		WHERE e.id > $1 ORDER BY e.id`, after)
	if err != nil {
		t.Fatalf("reading stock_events: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (evtRow, error) {
		var e evtRow
		err := r.Scan(&e.ID, &e.Seq, &e.SKU, &e.Location, &e.Cause, &e.OnHand, &e.Reserved, &e.ReservationID, &e.CheckoutID,
			&e.Xmin, &e.BalanceXmin, &e.BalanceOnHand, &e.BalanceRes)
		return e, err
	})
	if err != nil {
		t.Fatalf("reading stock_events: %v", err)
	}
	return out
}

// evtWant is an expected event. Res nil means no reservation and no
// checkout; otherwise the event must name Res.ID (read when the events are
// checked, so it may be filled by the call) and Checkout.
type evtWant struct {
	SKU, Location string
	Cause         string
	OnHand        int
	Reserved      int
	Res           *domain.Reservation
	Checkout      string
}

func (w evtWant) String() string {
	res := "NULL"
	if w.Res != nil {
		res = w.Res.ID
	}
	return fmt.Sprintf("{%s@%s %s on_hand %d reserved %d reservation %s checkout %q}",
		w.SKU, w.Location, w.Cause, w.OnHand, w.Reserved, res, w.Checkout)
}

// evtStep runs one call that must succeed and then requires that exactly
// the events in want were written, in that order, all unpublished, all by
// one transaction, which is also the last one that changed each balance
// involved, and that the last event of each balance carries the balance as
// it is in the table.
func (b *testBundle) evtStep(t *testing.T, what string, call func() error, want ...evtWant) []evtRow {
	t.Helper()
	mark := b.evtMaxID(t)
	if err := call(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got := b.evtRowsAfter(t, mark)
	b.evtRequire(t, what, got, want)
	return got
}

func (b *testBundle) evtRequire(t *testing.T, what string, got []evtRow, want []evtWant) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		var g, w []string
		for _, e := range got {
			g = append(g, e.String())
		}
		for _, e := range want {
			w = append(w, e.String())
		}
		t.Fatalf("%s: %s\n got events:\n  %s\nwant events:\n  %s", what, fmt.Sprintf(format, args...),
			strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
	if len(got) != len(want) {
		fail("%d events written, want %d", len(got), len(want))
	}
	for i, e := range got {
		w := want[i]
		if e.SKU != w.SKU || e.Location != w.Location || e.Cause != w.Cause || e.OnHand != w.OnHand || e.Reserved != w.Reserved {
			fail("event %d differs", i)
		}
		if w.Res == nil {
			if e.ReservationID != nil || e.CheckoutID != nil {
				fail("event %d carries a reservation or checkout", i)
			}
		} else if w.Res.ID == "" || e.ReservationID == nil || *e.ReservationID != w.Res.ID || e.CheckoutID == nil || *e.CheckoutID != w.Checkout {
			fail("event %d names the wrong reservation or checkout", i)
		}
		if e.Seq != nil {
			fail("event %d already has seq %d before any relay ran", i, *e.Seq)
		}
		if e.Xmin != got[0].Xmin {
			fail("event %d was written by transaction %s, event 0 by %s: one call must be one transaction", i, e.Xmin, got[0].Xmin)
		}
		if e.Xmin != e.BalanceXmin {
			fail("event %d was written by transaction %s but its balance was last changed by %s", i, e.Xmin, e.BalanceXmin)
		}
	}
	// The last event of each balance is the balance as it is now.
	last := map[string]evtRow{}
	for _, e := range got {
		last[e.SKU+"@"+e.Location] = e
	}
	for _, k := range slices.Sorted(maps.Keys(last)) {
		e := last[k]
		if e.OnHand != e.BalanceOnHand || e.Reserved != e.BalanceRes {
			fail("last event of %s says on_hand %d reserved %d, the balance row has %d / %d", k, e.OnHand, e.Reserved, e.BalanceOnHand, e.BalanceRes)
		}
	}
}

// evtRefused runs a call that must fail with code (or, with code "", return
// without an error but change nothing) and requires that it wrote no event.
func (b *testBundle) evtRefused(t *testing.T, what string, code domain.ErrorCode, call func() error) {
	t.Helper()
	mark := b.evtMaxID(t)
	err := call()
	switch {
	case code == "" && err != nil:
		t.Fatalf("%s: %v", what, err)
	case code != "":
		e, ok := domain.AsError(err)
		if !ok || e.Code != code {
			t.Fatalf("%s: got error %v, want %s", what, err, code)
		}
	}
	if got := b.evtRowsAfter(t, mark); len(got) != 0 {
		t.Fatalf("%s wrote %d events, want none: %v", what, len(got), got)
	}
}

// evtRequireDense fails unless seqs is exactly first, first+1, …, last.
func evtRequireDense(t *testing.T, what string, seqs []int64, first, last int64) {
	t.Helper()
	if int64(len(seqs)) != last-first+1 {
		t.Fatalf("%s: %d seqs, want %d (%d..%d)", what, len(seqs), last-first+1, first, last)
	}
	for i, s := range seqs {
		if s != first+int64(i) {
			t.Fatalf("%s: position %d has seq %d, want %d (a gap, duplicate or reordering); seqs around it: %v",
				what, i, s, first+int64(i), seqs[max(0, i-3):min(len(seqs), i+4)])
		}
	}
}
