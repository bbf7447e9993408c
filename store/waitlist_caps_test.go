package store_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/store"
	"inventory/testkit"
)

// Offer tests with fair use: an offer is a hold, so an entry joined with a
// checkout token is offered only while its checkout stays within its caps
// (live holds, units of the SKU); otherwise it is passed over, keeps its
// place and says why. And an entry without a location is offered units
// sourced as a plain reserve would source them.

// capLimits are small caps, so that a test reaches them in a few calls.
var capLimits = domain.FairUse{MaxHoldTTL: 600, MaxHoldLifetime: 3600, MaxUnitsPerSKU: 3, MaxLiveHolds: 3, MaxWaitlistTTL: 3600}

// capReserve reserves q units of sku at loc for checkout as a checkout token
// bound by limits would.
func (b *testBundle) capReserve(checkout, key, sku, loc string, q int, limits domain.FairUse) (domain.Reservation, error) {
	res, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key, TTLSeconds: 600,
		Lines: []domain.ReserveLine{line(sku, loc, q)}, Limits: &limits})
	return res, err
}

// capJoin joins the line for q units of sku at loc ("" for any location) as
// a checkout token bound by limits would.
func (b *testBundle) capJoin(checkout, key, sku, loc string, q int, limits domain.FairUse) (domain.WaitlistEntry, error) {
	in := domain.JoinWaitlistInput{CheckoutID: checkout, RequestKey: key, SKU: sku, Quantity: q, TTLSeconds: 3600, Limits: &limits}
	if loc != "" {
		in.Location = ptr(loc)
	}
	e, _, err := b.Store.WaitlistJoin(b.Ctx, in)
	return e, err
}

// release releases a hold as its checkout would.
func (b *testBundle) release(t *testing.T, checkout, id string) {
	t.Helper()
	if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{CheckoutID: checkout}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled}); err != nil {
		t.Fatalf("release %s of %s: %v", id, checkout, err)
	}
}

// liveHolds counts, in SQL, a checkout's live holds as the caps count them.
const liveHolds = `SELECT count(*) FROM reservations WHERE checkout_id = $1 AND status = 'held' AND expires_at > clock_timestamp()`

// liveUnits sums, in SQL, the units of a SKU in a checkout's live holds.
const liveUnits = `SELECT coalesce(sum(l.quantity), 0) FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
	JOIN skus s ON s.id = l.sku_id WHERE r.checkout_id = $1 AND s.code = $2 AND r.status = 'held' AND r.expires_at > clock_timestamp()`

// requirePassedOver checks that an entry still waits, first in line, and says
// which cap (its setting's name) passed it over.
func (b *testBundle) requirePassedOver(t *testing.T, e domain.WaitlistEntry, setting string) {
	t.Helper()
	got := b.entry(t, e.ID)
	if got.Status != domain.WaitlistWaiting || got.ReservationID != nil || got.Position == nil || *got.Position != 0 {
		t.Fatalf("entry of %s: %+v, want WAITING first in line", e.CheckoutID, got)
	}
	if got.SkippedReason == nil || !strings.Contains(*got.SkippedReason, setting) {
		t.Fatalf("entry of %s says %v, want a reason naming %s", e.CheckoutID, got.SkippedReason, setting)
	}
}

// TestWaitlistOfferRespectsLiveHoldCap: a checkout token at its cap of live
// holds joins a line (allowed: it may release one) with another checkout
// behind it. A unit comes back: the capped checkout gets no fourth hold (in
// SQL), its entry stays WAITING first in line and says why, and the next in
// line is offered the unit. Once the capped checkout has released a hold and
// units come back again, it is offered.
func TestWaitlistOfferRespectsLiveHoldCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-CAP-F", "L1", 10)
	sold := b.soldOut(t, "W-CAP", "L1", 1)
	var mine []domain.Reservation
	for i := range capLimits.MaxLiveHolds {
		res, err := b.capReserve("capped", fmt.Sprint("f", i), "W-CAP-F", "L1", 1, capLimits)
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, res)
	}
	if _, err := b.capReserve("capped", "over", "W-CAP-F", "L1", 1, capLimits); !isCode(err, domain.CodeLimitExceeded) {
		t.Fatalf("a fourth hold: %v, want LIMIT_EXCEEDED", err)
	}
	capped, err := b.capJoin("capped", "k", "W-CAP", "L1", 1, capLimits)
	if err != nil {
		t.Fatalf("a checkout at its cap of holds joins: %v", err)
	}
	next, err := b.capJoin("next", "k", "W-CAP", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}

	b.release(t, "buyer", sold.ID)
	if n := b.sqlInt(t, liveHolds, "capped"); n != capLimits.MaxLiveHolds {
		t.Fatalf("the capped checkout has %d live holds after a unit came back, cap %d", n, capLimits.MaxLiveHolds)
	}
	b.requirePassedOver(t, capped, "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS")
	b.requireOffered(t, "L1", next)

	// Below its cap again, and the unit back again: its turn.
	b.release(t, "capped", mine[0].ID)
	b.release(t, "next", *b.entry(t, next.ID).ReservationID)
	b.requireOffered(t, "L1", capped)
	if got := b.entry(t, capped.ID); got.SkippedReason != nil {
		t.Fatalf("an offered entry still says it was passed over: %q", *got.SkippedReason)
	}
	if n := b.sqlInt(t, liveHolds, "capped"); n != capLimits.MaxLiveHolds {
		t.Fatalf("the capped checkout has %d live holds, cap %d", n, capLimits.MaxLiveHolds)
	}
	b.requireInvariants(t)
}

// TestWaitlistOfferRespectsUnitsCap: the same with the cap on units of one
// SKU. The checkout joins the line at L1 while it holds 2 of the SKU's 3
// allowed units at L2, then reserves the third at L2. A unit back at L1
// goes to the next in line; the capped entry waits, first, saying why. When
// it has released a unit and L1's unit comes back again, it is offered, and
// it never holds more than 3 units of the SKU (in SQL).
func TestWaitlistOfferRespectsUnitsCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sold := b.soldOut(t, "W-UCAP", "L1", 1)
	b.Stock(t, "W-UCAP", "L2", 5)
	if _, err := b.capReserve("capped", "two", "W-UCAP", "L2", 2, capLimits); err != nil {
		t.Fatal(err)
	}
	capped, err := b.capJoin("capped", "k", "W-UCAP", "L1", 1, capLimits)
	if err != nil {
		t.Fatalf("joining for 1 while holding 2 of 3: %v", err)
	}
	third, err := b.capReserve("capped", "third", "W-UCAP", "L2", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.capJoin("next", "k", "W-UCAP", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}

	b.release(t, "buyer", sold.ID)
	if n := b.sqlInt(t, liveUnits, "capped", "W-UCAP"); n != capLimits.MaxUnitsPerSKU {
		t.Fatalf("the capped checkout holds %d units after a unit came back, cap %d", n, capLimits.MaxUnitsPerSKU)
	}
	b.requirePassedOver(t, capped, "INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU")
	b.requireOffered(t, "L1", next)

	b.release(t, "capped", third.ID)
	b.release(t, "next", *b.entry(t, next.ID).ReservationID)
	b.requireOffered(t, "L1", capped)
	if n := b.sqlInt(t, liveUnits, "capped", "W-UCAP"); n != capLimits.MaxUnitsPerSKU {
		t.Fatalf("the capped checkout holds %d units, cap %d", n, capLimits.MaxUnitsPerSKU)
	}
	b.requireInvariants(t)
}

// TestWaitlistOfferCapsCountOffersOfOneTransaction: one release ends a
// basket on two SKUs, and the same checkout waits in both lines with one
// hold left under its cap: the one transaction offers it one of them, not
// both (its own offers count), and the other entry is passed over, saying
// why, while the next in that line is offered.
func TestWaitlistOfferCapsCountOffersOfOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-TX-A", "L1", 1)
	b.Stock(t, "W-TX-B", "L1", 1)
	b.Stock(t, "W-TX-F", "L1", 10)
	basket := b.mustCreate(t, "buyer", "basket", 600, line("W-TX-A", "L1", 1), line("W-TX-B", "L1", 1))
	for i := range capLimits.MaxLiveHolds - 1 {
		if _, err := b.capReserve("capped", fmt.Sprint("f", i), "W-TX-F", "L1", 1, capLimits); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.capJoin("capped", "a", "W-TX-A", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := b.capJoin("capped", "b", "W-TX-B", "L1", 1, capLimits)
	if err != nil {
		t.Fatal(err)
	}
	nextA := b.mustJoin(t, "next", "a", "W-TX-A", "L1", 1)
	nextB := b.mustJoin(t, "next", "b", "W-TX-B", "L1", 1)
	b.release(t, "buyer", basket.ID)
	if n := b.sqlInt(t, liveHolds, "capped"); n != capLimits.MaxLiveHolds {
		t.Fatalf("the capped checkout has %d live holds, cap %d", n, capLimits.MaxLiveHolds)
	}
	first, second, passedNext := a, bb, nextB
	if b.entry(t, a.ID).Status != domain.WaitlistOffered {
		first, second, passedNext = bb, a, nextA
	}
	b.requireOffered(t, "L1", first, passedNext)
	b.requirePassedOver(t, second, "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS")
	b.requireInvariants(t)
}

// TestWaitlistTrustedEntriesHaveNoCaps: an entry joined by a service or
// admin caller is bound by no checkout cap at offer time, as its reserves
// are not: the checkout, with holds past a checkout token's cap, is offered.
func TestWaitlistTrustedEntriesHaveNoCaps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "W-TRUST-F", "L1", 10)
	sold := b.soldOut(t, "W-TRUST", "L1", 1)
	for i := range capLimits.MaxLiveHolds + 2 {
		b.mustCreate(t, "backend", fmt.Sprint("f", i), 600, line("W-TRUST-F", "L1", 1))
	}
	e := b.mustJoin(t, "backend", "k", "W-TRUST", "L1", 1)
	b.release(t, "buyer", sold.ID)
	b.requireOffered(t, "L1", e)
	if got := b.entry(t, e.ID); got.SkippedReason != nil {
		t.Fatalf("a trusted entry says %q", *got.SkippedReason)
	}
}

// TestWaitlistUnlocatedOfferSplitsOverLocations: an entry without a location
// waits for 3 units while the SKU has 2 at each of two locations, all held.
// The location second in sourcing order frees its 2 first: 2 are free, too
// few, nothing is offered. Then the first location frees its 2: 4 are free
// across locations, and the entry is offered 3 as a plain reserve would
// source them — 2 at the first location by priority, 1 at the second — in
// one HELD reservation with a line per location (checked in SQL, with the
// balances, the ledger and the stock events).
func TestWaitlistUnlocatedOfferSplitsOverLocations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "S-FIRST", 1)
	mustLocation(t, b, "S-SECOND", 2)
	b.Stock(t, "W-SPLIT", "S-FIRST", 2)
	b.Stock(t, "W-SPLIT", "S-SECOND", 2)
	atFirst := b.mustCreate(t, "buyer", "first", 600, line("W-SPLIT", "S-FIRST", 2))
	atSecond := b.mustCreate(t, "buyer", "second", 600, line("W-SPLIT", "S-SECOND", 2))
	e := b.mustJoin(t, "split", "k", "W-SPLIT", "", 3)

	b.release(t, "buyer", atSecond.ID)
	b.requireWaiting(t, e)
	b.release(t, "buyer", atFirst.ID)
	got := b.entry(t, e.ID)
	if got.Status != domain.WaitlistOffered || got.ReservationID == nil {
		t.Fatalf("the unlocated entry for 3 with 2 + 2 free: %+v, want OFFERED", got)
	}
	res, err := b.Store.ReservationGetByID(b.Ctx, domain.Scope{CheckoutID: "split"}, *got.ReservationID)
	if err != nil || res == nil || res.Status != domain.StatusHeld || res.RequestKey != domain.WaitlistOfferKeyPrefix+e.ID {
		t.Fatalf("offer: %+v %v", res, err)
	}
	lines := map[string]int{}
	for _, l := range res.Lines {
		lines[l.Location] += l.Quantity
	}
	if len(res.Lines) != 2 || lines["S-FIRST"] != 2 || lines["S-SECOND"] != 1 {
		t.Fatalf("offer lines %+v, want 2 at S-FIRST and 1 at S-SECOND", res.Lines)
	}
	for loc, want := range map[string]int{"S-FIRST": 2, "S-SECOND": 1} {
		if _, reserved := b.Balance(t, "W-SPLIT", loc); reserved != want {
			t.Fatalf("%s reserved %d, want %d", loc, reserved, want)
		}
		if n := b.sqlInt(t, `SELECT coalesce(sum(m.reserved_delta), 0) FROM stock_movements m JOIN locations l ON l.id = m.location_id
			WHERE m.reservation_id = $1 AND l.code = $2 AND m.cause = 'reserved' AND m.actor = 'system:waitlist'`, res.ID, loc); n != want {
			t.Fatalf("ledger at %s: %d reserved by the offer, want %d", loc, n, want)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM stock_events e JOIN locations l ON l.id = e.location_id
			WHERE e.reservation_id = $1 AND l.code = $2 AND e.cause = 'reserved' AND e.checkout_id = 'split'`, res.ID, loc); n != 1 {
			t.Fatalf("%d stock events of the offer at %s, want 1", n, loc)
		}
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1`, res.ID); n != 1 {
		t.Fatalf("the offer has %d expiry jobs, want 1", n)
	}
	b.requireInvariants(t)
}

// TestWaitlistUnlocatedSplitKeepsJoinOrder: an unlocated entry for 3 is
// first in line, a located entry for 1 at the second location behind it.
// Units come back at both locations (2 + 2) in one stock sync: the first
// entry takes 2 + 1, the located one the last unit at the second location;
// then nothing is left.
func TestWaitlistUnlocatedSplitKeepsJoinOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "J-FIRST", 1)
	mustLocation(t, b, "J-SECOND", 2)
	b.Stock(t, "W-JO", "J-FIRST", 0)
	b.Stock(t, "W-JO", "J-SECOND", 0)
	any3 := b.mustJoin(t, "any", "k", "W-JO", "", 3)
	at2 := b.mustJoin(t, "at2", "k", "W-JO", "J-SECOND", 1)
	if _, err := b.Store.StockLevelsSet(b.Ctx, domain.SetStockLevelsInput{Reference: nextRef("sync"), Levels: []domain.StockLevel{
		{SKU: "W-JO", Location: "J-SECOND", OnHand: 2}, {SKU: "W-JO", Location: "J-FIRST", OnHand: 2}}}); err != nil {
		t.Fatal(err)
	}
	b.requireOffered(t, "J-SECOND", at2)
	if got := b.entry(t, any3.ID); got.Status != domain.WaitlistOffered {
		t.Fatalf("the unlocated entry first in line: %+v", got)
	}
	for loc := range map[string]bool{"J-FIRST": true, "J-SECOND": true} {
		if onHand, reserved := b.Balance(t, "W-JO", loc); onHand != reserved {
			t.Fatalf("%s: %d on hand, %d reserved: units left free", loc, onHand, reserved)
		}
	}
	b.requireInvariants(t)
}

// TestWaitlistCapsUnderConcurrency: sixteen checkout tokens near their caps
// (3 live holds, 3 units of a SKU) reserve, join two lines of a scarce SKU
// (at either location, or at any), release holds and offers, on two store
// instances at once, while a backend releases and receives the scarce SKU.
// Throughout (sampled in SQL) and afterwards, no checkout has more than 3
// live holds or 3 units of a SKU in them; the scarce units the clients were
// granted (reserves and offers, counted on the client side, minus what they
// released) are never more than the units stocked; entries were passed over
// for their caps and offered later; no deadlock.
func TestWaitlistCapsUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		hot, fill  = "W-CC", "W-CC-F"
		checkouts  = 16
		rounds     = 25
		startStock = 6 // per location
	)
	mustLocation(t, b, "CC-1", 1)
	mustLocation(t, b, "CC-2", 2)
	b.Stock(t, fill, "CC-1", 10_000)
	b.Stock(t, hot, "CC-1", startStock)
	b.Stock(t, hot, "CC-2", startStock)
	// A second instance with a pool this test can empty: a backend's
	// deadlock count reaches pg_stat_database when it exits.
	pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	second := testkit.NewStore(t, pool)
	instances := []*store.Store{b.Store, second}
	before := b.deadlocksSoFar(t)

	// ledger is the client side's count of the scarce SKU's units it holds:
	// granted by a reserve or an offer, minus released.
	var mu sync.Mutex
	held := map[string]int{} // reservation id -> scarce units, while held
	grant := func(id string, units int) {
		mu.Lock()
		defer mu.Unlock()
		held[id] = units
	}
	let := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		delete(held, id)
	}
	var stocked atomic.Int64
	stocked.Store(2 * startStock)
	var passedOver, offered atomic.Int64

	// The backend holds all scarce units at first and lets them go slowly,
	// and receives a few more.
	var backendHolds []string
	for i, loc := range []string{"CC-1", "CC-2"} {
		for j := range startStock {
			res := b.mustCreate(t, "backend", fmt.Sprintf("b%d-%d", i, j), 600, line(hot, loc, 1))
			grant(res.ID, 1)
			backendHolds = append(backendHolds, res.ID)
		}
	}

	var done atomic.Bool
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Sampled in SQL while the workload runs: one statement, one snapshot.
	var maxHolds, maxUnits atomic.Int64
	sample := func() error {
		var h, u int
		err := b.Pool.QueryRow(b.Ctx, `
			SELECT coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM reservations
			                 WHERE checkout_id LIKE 'cc-%' AND status = 'held' AND expires_at > clock_timestamp() GROUP BY checkout_id) h), 0),
			       coalesce((SELECT max(u) FROM (SELECT sum(l.quantity) AS u FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
			                 WHERE r.checkout_id LIKE 'cc-%' AND r.status = 'held' AND r.expires_at > clock_timestamp() GROUP BY r.checkout_id, l.sku_id) u), 0)`).Scan(&h, &u)
		if err == nil {
			maxHolds.Store(max(maxHolds.Load(), int64(h)))
			maxUnits.Store(max(maxUnits.Load(), int64(u)))
		}
		return err
	}
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for !done.Load() {
			if err := sample(); err != nil {
				report(fmt.Errorf("sample: %w", err))
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	backendDone := make(chan struct{})
	var backend sync.WaitGroup
	backend.Go(func() {
		defer close(backendDone)
		rng := rand.New(rand.NewPCG(7, 7))
		rng.Shuffle(len(backendHolds), func(i, j int) { backendHolds[i], backendHolds[j] = backendHolds[j], backendHolds[i] })
		for i, id := range backendHolds {
			if _, err := instances[i%2].ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonOther}); err != nil {
				report(fmt.Errorf("backend release: %w", err))
			}
			let(id)
			if i%4 == 3 {
				loc := []string{"CC-1", "CC-2"}[i%2]
				if _, err := instances[i%2].StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: hot, Location: loc, Quantity: 1, Reference: nextRef("cc-po")}); err != nil {
					report(fmt.Errorf("receive: %w", err))
				}
				stocked.Add(1)
			}
			time.Sleep(time.Duration(5+rng.IntN(10)) * time.Millisecond)
		}
	})

	var shoppers, looping sync.WaitGroup
	looping.Add(checkouts)
	for g := range checkouts {
		shoppers.Go(func() {
			checkout := fmt.Sprintf("cc-%02d", g)
			st := instances[g%2]
			scope := domain.Scope{CheckoutID: checkout}
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			var mine []string // this checkout's holds it knows of, scarce or not
			var entry *domain.WaitlistEntry
			n := 0
			key := func() string { n++; return fmt.Sprintf("k%d", n) }
			for range rounds {
				// Near the cap: fill up with holds of the plentiful SKU.
				for len(mine) < capLimits.MaxLiveHolds-rng.IntN(2) {
					res, _, err := st.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key(), TTLSeconds: 600,
						Lines: []domain.ReserveLine{line(fill, "CC-1", 1)}, Limits: &capLimits})
					if err != nil {
						if err := allowedErr("reserve", err, domain.CodeLimitExceeded); err != nil {
							report(err)
						}
						break
					}
					mine = append(mine, res.ID)
				}
				// Wait in line for the scarce SKU (or reserve it, if free).
				if entry == nil {
					loc := []string{"", "CC-1", "CC-2"}[rng.IntN(3)]
					q := 1 + rng.IntN(2)
					in := domain.JoinWaitlistInput{CheckoutID: checkout, RequestKey: key(), SKU: hot, Quantity: q, TTLSeconds: 3600, Limits: &capLimits}
					if loc != "" {
						in.Location = ptr(loc)
					}
					e, _, err := st.WaitlistJoin(b.Ctx, in)
					switch {
					case err == nil:
						entry = &e
					case isCode(err, domain.CodeInvalidInput):
						res, _, err := st.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: key(), TTLSeconds: 600,
							Lines: []domain.ReserveLine{{SKU: hot, Location: in.Location, Quantity: q}}, Limits: &capLimits})
						if err == nil {
							grant(res.ID, q)
							mine = append(mine, res.ID)
						} else if err := allowedErr("reserve scarce", err, domain.CodeLimitExceeded, domain.CodeOutOfStock); err != nil {
							report(err)
						}
					default:
						if err := allowedErr("join", err, domain.CodeLimitExceeded); err != nil {
							report(err)
						}
					}
				}
				// Was it offered, or passed over?
				if entry != nil {
					got, err := st.WaitlistEntryGet(b.Ctx, scope, entry.ID)
					switch {
					case err != nil || got == nil:
						report(fmt.Errorf("read entry: %+v %v", got, err))
					case got.Status == domain.WaitlistOffered:
						res, err := st.ReservationGetByID(b.Ctx, scope, *got.ReservationID)
						if err != nil || res == nil {
							report(fmt.Errorf("read offer: %+v %v", res, err))
							break
						}
						units := 0
						for _, l := range res.Lines {
							units += l.Quantity
						}
						grant(res.ID, units)
						offered.Add(1)
						mine = append(mine, res.ID)
						entry = nil
					case got.Status == domain.WaitlistWaiting && got.SkippedReason != nil:
						passedOver.Add(1)
					}
				}
				// Let one hold go, now and then (an offer among them).
				if len(mine) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(mine))
					if _, err := st.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: mine[i], Reason: domain.ReasonCustomerCancelled}); err != nil {
						report(fmt.Errorf("release: %w", err))
					}
					let(mine[i])
					mine = append(mine[:i], mine[i+1:]...)
				}
				time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
			}
			// Offers made after the last look count too: once the backend
			// has let every unit go and no shopper releases any more, none
			// is made.
			looping.Done()
			looping.Wait()
			<-backendDone
			if entry != nil {
				if got, err := st.WaitlistEntryGet(b.Ctx, scope, entry.ID); err == nil && got != nil && got.Status == domain.WaitlistOffered {
					if res, err := st.ReservationGetByID(b.Ctx, scope, *got.ReservationID); err == nil && res != nil {
						units := 0
						for _, l := range res.Lines {
							units += l.Quantity
						}
						grant(res.ID, units)
						offered.Add(1)
					}
				}
			}
		})
	}
	shoppers.Wait()
	backend.Wait()
	done.Store(true)
	monitor.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := sample(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	granted := 0
	for _, u := range held {
		granted += u
	}
	mu.Unlock()
	t.Logf("%d offers, %d looks at a passed-over entry, %d scarce units held of %d stocked (client side); most live holds of a checkout %d, most units of a SKU %d (SQL)",
		offered.Load(), passedOver.Load(), granted, stocked.Load(), maxHolds.Load(), maxUnits.Load())
	if maxHolds.Load() > int64(capLimits.MaxLiveHolds) || maxUnits.Load() > int64(capLimits.MaxUnitsPerSKU) {
		t.Fatalf("a checkout had %d live holds or %d units of a SKU; caps %d and %d", maxHolds.Load(), maxUnits.Load(), capLimits.MaxLiveHolds, capLimits.MaxUnitsPerSKU)
	}
	if int64(granted) > stocked.Load() {
		t.Fatalf("the clients hold %d scarce units, %d were stocked", granted, stocked.Load())
	}
	if n := b.sqlInt(t, `SELECT coalesce(sum(l.quantity), 0) FROM reservations r JOIN reservation_lines l ON l.reservation_id = r.id
		JOIN skus s ON s.id = l.sku_id WHERE s.code = $1 AND r.status = 'held'`, hot); n != granted {
		t.Fatalf("SQL says %d scarce units are held, the clients count %d", n, granted)
	}
	// Passed over: seen by the clients, or still saying so at the end.
	stillPassedOver := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'waiting' AND skipped_reason IS NOT NULL`)
	if offered.Load() == 0 || passedOver.Load()+int64(stillPassedOver) == 0 {
		t.Fatalf("the workload did not exercise offers (%d) and entries passed over for their caps (%d)", offered.Load(), passedOver.Load())
	}
	b.requireInvariants(t)
	pool.Reset()
	if after := b.deadlocksSoFar(t); after != before {
		t.Fatalf("%d deadlocks", after-before)
	}
}
