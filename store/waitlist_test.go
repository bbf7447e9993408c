package store_test

import (
	"testing"
	"time"

	"inventory/domain"
)

// Waitlist tests: joining (idempotency, one live entry, limits, refusal
// while stock is free) and reading entries in scope.

// join is WaitlistJoin for a located entry with the default TTL.
func (b *testBundle) join(checkout, key, sku, location string, q int) (domain.WaitlistEntry, bool, error) {
	in := domain.JoinWaitlistInput{CheckoutID: checkout, RequestKey: key, SKU: sku, Quantity: q, TTLSeconds: domain.DefaultWaitlistTTL}
	if location != "" {
		in.Location = ptr(location)
	}
	return b.Store.WaitlistJoin(b.Ctx, in)
}

// mustJoin is join failing the test on any error.
func (b *testBundle) mustJoin(t *testing.T, checkout, key, sku, location string, q int) domain.WaitlistEntry {
	t.Helper()
	e, _, err := b.join(checkout, key, sku, location, q)
	if err != nil {
		t.Fatalf("join %s/%s: %v", checkout, key, err)
	}
	return e
}

// entry reads an entry as an admin would.
func (b *testBundle) entry(t *testing.T, id string) domain.WaitlistEntry {
	t.Helper()
	e, err := b.Store.WaitlistEntryGet(b.Ctx, domain.Scope{}, id)
	if err != nil || e == nil {
		t.Fatalf("WaitlistEntryGet(%s): %v %v", id, e, err)
	}
	return *e
}

// soldOut makes sku at loc with onHand units and holds them all for
// checkout "buyer", returning that hold.
func (b *testBundle) soldOut(t *testing.T, sku, loc string, onHand int) domain.Reservation {
	t.Helper()
	b.Stock(t, sku, loc, onHand)
	return b.mustCreate(t, "buyer", "all-"+sku, 600, line(sku, loc, onHand))
}

func TestWaitlistJoinIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-IDEM", "L1", 2)
	first, replayed, err := b.join("c1", "k1", "W-IDEM", "L1", 2)
	if err != nil || replayed {
		t.Fatalf("first join: %+v replayed=%v %v", first, replayed, err)
	}
	if first.Status != domain.WaitlistWaiting || first.Position == nil || *first.Position != 0 || first.Quantity != 2 || *first.Location != "L1" {
		t.Fatalf("first join: %+v", first)
	}
	again, replayed, err := b.join("c1", "k1", "W-IDEM", "L1", 2)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("replay: %+v replayed=%v %v (first %s)", again, replayed, err, first.ID)
	}
	_, _, err = b.join("c1", "k1", "W-IDEM", "L1", 1)
	expectCode(t, err, domain.CodeIdempotencyKeyReused)
	// Another key for the same SKU while the first waits: one live entry.
	_, _, err = b.join("c1", "k2", "W-IDEM", "L1", 1)
	expectCode(t, err, domain.CodeAlreadyExists)
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries`); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
	// A second checkout is behind the first.
	second := b.mustJoin(t, "c2", "k1", "W-IDEM", "L1", 1)
	if second.Position == nil || *second.Position != 1 {
		t.Fatalf("second position: %+v", second)
	}
	// After leaving, the checkout may join again (a new key).
	left, err := b.Store.WaitlistLeave(b.Ctx, domain.Scope{}, first.ID)
	if err != nil || left.Status != domain.WaitlistLeft || left.Position != nil {
		t.Fatalf("leave: %+v %v", left, err)
	}
	if got := b.entry(t, second.ID); *got.Position != 0 {
		t.Fatalf("second after the first left: %+v", got)
	}
	if _, _, err := b.join("c1", "k3", "W-IDEM", "L1", 1); err != nil {
		t.Fatalf("join after leaving: %v", err)
	}
}

func TestWaitlistJoinRefusedWhileStockIsFree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-FREE", "L1", 3)
	b.mustCreate(t, "buyer", "r1", 600, line("W-FREE", "L1", 1))
	_, _, err := b.join("c1", "k1", "W-FREE", "L1", 2)
	e := expectCode(t, err, domain.CodeInvalidInput)
	if e.Available == nil || *e.Available != 2 {
		t.Fatalf("available: %+v", e)
	}
	// Unlocated: what is free across locations counts.
	b.Stock(t, "W-FREE", "L2", 1)
	_, _, err = b.join("c1", "k2", "W-FREE", "", 3)
	if e := expectCode(t, err, domain.CodeInvalidInput); *e.Available != 3 {
		t.Fatalf("available across locations: %+v", e)
	}
	// More than is free waits.
	if e := b.mustJoin(t, "c1", "k3", "W-FREE", "", 4); e.Status != domain.WaitlistWaiting || e.Location != nil {
		t.Fatalf("unlocated entry: %+v", e)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries`); n != 1 {
		t.Fatalf("%d entries, want 1: refused joins left nothing", n)
	}
	_, _, err = b.join("c1", "k4", "NOPE", "L1", 1)
	expectCode(t, err, domain.CodeUnknownSKU)
	_, _, err = b.join("c1", "k5", "W-FREE", "NOPE", 1)
	expectCode(t, err, domain.CodeUnknownLocation)
}

func TestWaitlistJoinLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-LIM", "L1", 1)
	b.soldOut(t, "W-LIM2", "L1", 1)
	limits := domain.FairUse{MaxHoldTTL: 300, MaxHoldLifetime: 600, MaxUnitsPerSKU: 3, MaxLiveHolds: 1, MaxWaitlistTTL: 120}
	in := func(key, sku string, q, ttl int) domain.JoinWaitlistInput {
		return domain.JoinWaitlistInput{CheckoutID: "c1", RequestKey: key, SKU: sku, Location: ptr("L1"), Quantity: q, TTLSeconds: ttl, Limits: &limits}
	}
	for _, c := range []struct {
		name string
		in   domain.JoinWaitlistInput
		code domain.ErrorCode
	}{
		{"zero quantity", in("a", "W-LIM", 0, 60), domain.CodeInvalidInput},
		{"quantity past MaxQuantity", domain.JoinWaitlistInput{CheckoutID: "c1", RequestKey: "b", SKU: "W-LIM", Quantity: domain.MaxQuantity + 1, TTLSeconds: 60}, domain.CodeInvalidInput},
		{"zero ttl", in("c", "W-LIM", 1, 0), domain.CodeInvalidInput},
		{"ttl past MaxWaitlistTTL", domain.JoinWaitlistInput{CheckoutID: "c1", RequestKey: "d", SKU: "W-LIM", Quantity: 1, TTLSeconds: domain.MaxWaitlistTTL + 1}, domain.CodeInvalidInput},
		{"ttl past the checkout's limit", in("e", "W-LIM", 1, 121), domain.CodeLimitExceeded},
		{"units past the checkout's limit", in("f", "W-LIM", 4, 60), domain.CodeLimitExceeded},
		{"empty checkout", domain.JoinWaitlistInput{RequestKey: "g", SKU: "W-LIM", Quantity: 1, TTLSeconds: 60}, domain.CodeInvalidInput},
	} {
		_, _, err := b.Store.WaitlistJoin(b.Ctx, c.in)
		if !isCode(err, c.code) {
			t.Errorf("%s: want %s, got %v", c.name, c.code, err)
		}
	}
	// Units held already count: c1 holds 2 of W-LIM2 via another reservation.
	b.Stock(t, "W-LIM2", "L1", 2)
	b.mustCreate(t, "c1", "held2", 60, line("W-LIM2", "L1", 2))
	_, _, err := b.Store.WaitlistJoin(b.Ctx, in("h", "W-LIM2", 2, 60))
	if e := expectCode(t, err, domain.CodeLimitExceeded); *e.Available != 1 {
		t.Fatalf("units left: %+v", e)
	}
	// One line at a time for this checkout (MaxLiveHolds 1).
	e, _, err := b.Store.WaitlistJoin(b.Ctx, in("i", "W-LIM", 3, 60))
	if err != nil {
		t.Fatal(err)
	}
	if e.OfferTTLSeconds != 300 {
		t.Fatalf("offer TTL %d, want the checkout's MaxHoldTTL 300", e.OfferTTLSeconds)
	}
	_, _, err = b.Store.WaitlistJoin(b.Ctx, in("j", "W-LIM2", 1, 60))
	expectCode(t, err, domain.CodeLimitExceeded)
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries`); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
	// A service caller is bound by the input limits only and gets the default hold TTL.
	svc, _, err := b.join("c9", "s", "W-LIM", "L1", 50)
	if err != nil || svc.OfferTTLSeconds != domain.DefaultHoldTTL {
		t.Fatalf("service join: %+v %v", svc, err)
	}
}

func TestWaitlistScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-SCOPE", "L1", 1)
	e := b.mustJoin(t, "c1", "k1", "W-SCOPE", "L1", 1)
	other := domain.Scope{CheckoutID: "c2"}
	if got, err := b.Store.WaitlistEntryGet(b.Ctx, other, e.ID); got != nil || err != nil {
		t.Fatalf("another checkout read the entry: %+v %v", got, err)
	}
	_, err := b.Store.WaitlistLeave(b.Ctx, other, e.ID)
	expectCode(t, err, domain.CodeNotFound)
	_, err = b.Store.WaitlistLeave(b.Ctx, other, "not-a-uuid")
	expectCode(t, err, domain.CodeNotFound)
	if got := b.entry(t, e.ID); got.Status != domain.WaitlistWaiting {
		t.Fatalf("entry after another checkout's leave: %+v", got)
	}
	own := domain.Scope{CheckoutID: "c1"}
	if got, err := b.Store.WaitlistEntryGet(b.Ctx, own, e.ID); got == nil || err != nil {
		t.Fatalf("own read: %+v %v", got, err)
	}
	if got, err := b.Store.WaitlistLeave(b.Ctx, own, e.ID); err != nil || got.Status != domain.WaitlistLeft {
		t.Fatalf("own leave: %+v %v", got, err)
	}
	// Leaving again returns it as it is.
	if got, err := b.Store.WaitlistLeave(b.Ctx, own, e.ID); err != nil || got.Status != domain.WaitlistLeft {
		t.Fatalf("second leave: %+v %v", got, err)
	}
}

func TestWaitlistOfferKeyIsReserved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-KEY", "L1", 1)
	_, _, err := b.create("c1", domain.WaitlistOfferKeyPrefix+"00000000-0000-0000-0000-000000000000", 60, line("W-KEY", "L1", 1))
	expectCode(t, err, domain.CodeInvalidInput)
}

func TestWaitlistReconciliation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hold := b.soldOut(t, "W-REC", "L1", 2)
	e := b.mustJoin(t, "c1", "k1", "W-REC", "L1", 2)
	other := b.mustJoin(t, "c2", "k1", "W-REC", "L1", 1)
	b.RequireReconciled(t)
	// A waiting entry that fits free units: as if a path freed them
	// without offering (written here behind the store's back).
	b.Stock(t, "W-REC", "L2", 2)
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE waitlist_entries SET location_id = NULL WHERE id = $1`, other.ID); err != nil {
		t.Fatal(err)
	}
	// An offer whose reservation is not its own.
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE waitlist_entries SET status = 'offered', reservation_id = $2, ended_at = now() WHERE id = $1`, e.ID, hold.ID); err != nil {
		t.Fatal(err)
	}
	issues, err := b.Store.Reconciliation(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, i := range issues {
		kinds[i.Kind] = i.SKU + "@" + i.Location
	}
	if len(issues) != 2 || kinds["waitlist_offer_mismatch"] != "W-REC@L1" || kinds["waitlist_fits_free"] != "W-REC@L2" {
		t.Fatalf("reconciliation: %+v", issues)
	}
}

func TestWaitlistExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-TTL", "L1", 1)
	e, _, err := b.Store.WaitlistJoin(b.Ctx, domain.JoinWaitlistInput{CheckoutID: "c1", RequestKey: "k", SKU: "W-TTL", Location: ptr("L1"), Quantity: 1, TTLSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'waitlist_expiry' AND args->>'entry_id' = $1 AND scheduled_at = $2`, e.ID, e.ExpiresAt); n != 1 {
		t.Fatalf("%d expiry jobs at the entry's deadline, want 1", n)
	}
	notBefore, expired, err := b.Store.WaitlistExpire(b.Ctx, e.ID)
	if err != nil || expired || notBefore == nil || !notBefore.Equal(e.ExpiresAt) {
		t.Fatalf("before the deadline: %v %v %v, want not yet (at %v)", notBefore, expired, err, e.ExpiresAt)
	}
	time.Sleep(time.Until(e.ExpiresAt) + 50*time.Millisecond)
	if notBefore, expired, err := b.Store.WaitlistExpire(b.Ctx, e.ID); err != nil || !expired || notBefore != nil {
		t.Fatalf("after the deadline: %v %v %v", notBefore, expired, err)
	}
	if got := b.entry(t, e.ID); got.Status != domain.WaitlistExpired {
		t.Fatalf("entry: %+v", got)
	}
	// Again, and for an unknown entry: nothing to do.
	if notBefore, expired, err := b.Store.WaitlistExpire(b.Ctx, e.ID); err != nil || expired || notBefore != nil {
		t.Fatalf("again: %v %v %v", notBefore, expired, err)
	}
	if _, expired, err := b.Store.WaitlistExpire(b.Ctx, "00000000-0000-0000-0000-000000000000"); err != nil || expired {
		t.Fatalf("unknown: %v %v", expired, err)
	}
	// A refused join leaves no job behind.
	b.Stock(t, "W-TTL2", "L1", 1)
	if _, _, err := b.join("c1", "k2", "W-TTL2", "L1", 1); !isCode(err, domain.CodeInvalidInput) {
		t.Fatalf("join with stock free: %v", err)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'waitlist_expiry'`); n != 1 {
		t.Fatalf("%d waitlist expiry jobs, want 1", n)
	}
}
