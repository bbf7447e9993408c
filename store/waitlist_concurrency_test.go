package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/store"
	"inventory/testkit"
)

// TestWaitlistFairUnderConcurrency: a line of 1,000 entries is joined over
// two store instances, eight at a time (the join order recorded in seq),
// then 300 held units and more come back concurrently — releases from
// several goroutines on two store instances, set-based expiries, receipts
// and adjustments up, and offers released again so they pass on — while
// plain reserves race for the same SKU. Afterwards, in SQL:
//
//   - after every transaction on the balance, no waiting entry fits what is
//     free (so no plain reserve ever took a unit an entry fitted, and every
//     freed unit that fitted someone was offered before commit);
//   - offers went first-fit in join order: no entry was offered while an
//     earlier one that needed no more was still waiting;
//   - each offered entry has its own HELD-at-offer reservation of its
//     quantity, no reservation is shared, and the balance is not oversold
//     (invariants and reconciliation).
func TestWaitlistFairUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		sku, loc = "W-RACE", "L1"
		seeds    = 150 // holds of 1, 2 or 3 units: 300 units, all held
		entries  = 1000
		plain    = 4 // goroutines of plain reserves
		freers   = 4 // goroutines releasing seed holds
	)
	// Seed sizes 1, 2, 3 (spread over released and expiring seeds): a
	// single unit freed alone fits no entry (they wait for 2..4), so plain
	// reserves get some.
	size := func(i int) int { return 1 + (i/3+i)%3 }
	units := 0
	for i := range seeds {
		units += size(i)
	}
	b.Stock(t, sku, loc, units)
	var seedIDs []string
	for i := range seeds {
		ttl := 600
		if i%3 == 0 {
			ttl = 1 // these expire, set-based, instead of being released
		}
		seedIDs = append(seedIDs, b.mustCreate(t, fmt.Sprintf("seed-%d", i), "k", ttl, line(sku, loc, size(i))).ID)
	}
	rng := rand.New(rand.NewPCG(20, 20))
	second := b.secondInstance(t)
	instances := []*store.Store{b.Store, second}
	// Joined over both instances, eight at a time: seq records the order
	// they committed in, which is the line's order.
	quantities := make([]int, entries)
	for i := range quantities {
		quantities[i] = 2 + rng.IntN(3) // 2..4: single units left over go to plain reserves
	}
	testkit.Writers(t, 8, func(g int) error {
		for i := g; i < entries; i += 8 {
			in := domain.JoinWaitlistInput{CheckoutID: fmt.Sprintf("w-%04d", i), RequestKey: "k", SKU: sku, Location: ptr(loc),
				Quantity: quantities[i], TTLSeconds: domain.DefaultWaitlistTTL}
			if _, _, err := instances[i%2].WaitlistJoin(b.Ctx, in); err != nil {
				return fmt.Errorf("join %d: %w", i, err)
			}
		}
		return nil
	})
	if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'waiting'`); n != entries {
		t.Fatalf("%d entries waiting after %d joins", n, entries)
	}
	joinedThrough := b.sqlInt(t, `SELECT coalesce(max(id), 0) FROM stock_events`)

	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Freers: release the long seed holds in random order.
	var long []string
	for i, id := range seedIDs {
		if i%3 != 0 {
			long = append(long, id)
		}
	}
	rng.Shuffle(len(long), func(i, j int) { long[i], long[j] = long[j], long[i] })
	var next atomic.Int64
	var freersWG sync.WaitGroup
	for g := range freers {
		freersWG.Add(1)
		wg.Go(func() {
			defer freersWG.Done()
			st := instances[g%2]
			for {
				i := int(next.Add(1)) - 1
				if i >= len(long) {
					return
				}
				if _, err := st.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: long[i], Reason: domain.ReasonPaymentFailed}); err != nil {
					report(fmt.Errorf("release %s: %w", long[i], err))
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		})
	}
	// Expiry: the short seed holds fall due and are expired set-based.
	wg.Go(func() {
		for !done.Load() {
			if _, err := second.ReservationExpireDue(b.Ctx, 5); err != nil {
				report(fmt.Errorf("expire due: %w", err))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Offers of every third entry are let go again: their units pass on.
	wg.Go(func() {
		for !done.Load() {
			rows, err := b.Pool.Query(b.Ctx, `
				SELECT w.reservation_id::text FROM waitlist_entries w JOIN reservations r ON r.id = w.reservation_id
				WHERE w.status = 'offered' AND w.seq % 3 = 0 AND r.status = 'held'`)
			var ids []string
			if err == nil {
				for rows.Next() {
					var id string
					if err := rows.Scan(&id); err == nil {
						ids = append(ids, id)
					}
				}
				rows.Close()
				err = rows.Err()
			}
			if err != nil {
				report(fmt.Errorf("list offers: %w", err))
				return
			}
			for _, id := range ids {
				if _, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: id, Reason: domain.ReasonCustomerCancelled}); err != nil {
					report(fmt.Errorf("release offer %s: %w", id, err))
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	// Receipts and adjustments up bring units in from the other instance.
	var stocked atomic.Int64
	wg.Go(func() {
		for i := 0; i < 6; i++ {
			q := 1 + rand.IntN(3)
			var err error
			if i%2 == 0 {
				_, err = second.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: q, Reference: nextRef("race-po")})
			} else {
				_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: q, Reason: "found", Reference: nextRef("race-adj")})
			}
			if err != nil {
				report(fmt.Errorf("stock in: %w", err))
			}
			stocked.Add(int64(q))
			time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
		}
	})
	// Plain reserves race for single units.
	var plainHeld atomic.Int64
	for g := range plain {
		wg.Go(func() {
			st := instances[g%2]
			for n := 0; !done.Load(); n++ {
				_, _, err := st.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("plain-%d", g), RequestKey: fmt.Sprintf("k%d", n),
					TTLSeconds: 600, Lines: []domain.ReserveLine{{SKU: sku, Location: ptr(loc), Quantity: 1}}})
				if err == nil {
					plainHeld.Add(1)
				} else if err := allowedErr("plain reserve", err, domain.CodeOutOfStock); err != nil {
					report(err)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	freersWG.Wait()
	// Until the short holds have all expired and their units moved on.
	deadline := time.Now().Add(30 * time.Second)
	for b.sqlInt(t, `SELECT count(*) FROM reservations WHERE checkout_id LIKE 'seed-%' AND status = 'held'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("seed holds still held after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	offered := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'offered'`)
	released := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries w JOIN reservations r ON r.id = w.reservation_id WHERE r.status = 'released'`)
	t.Logf("%d of %d entries offered (%d offers let go again), %d plain holds, %d units stocked in", offered, entries, released, plainHeld.Load(), stocked.Load())
	if offered == 0 || released == 0 || plainHeld.Load() == 0 {
		t.Fatalf("the workload did not exercise offers, passing on and plain reserves: %d offered, %d let go, %d plain", offered, released, plainHeld.Load())
	}

	// offer_at: each entry with the id of the stock event of its offer.
	// before: what was free just before the offer (its event carries the
	// balance as the offer left it).
	const offerAt = `
		WITH offer_at AS (
			SELECT w.seq, w.quantity, e.id AS ev, e.on_hand - e.reserved + w.quantity AS before
			FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id
			LEFT JOIN stock_events e ON e.reservation_id = w.reservation_id AND e.cause = 'reserved'
			WHERE s.code = $1
		)`
	// After each transaction on the balance (its last event), no entry still
	// waiting then fits what it left free.
	if n := b.sqlInt(t, offerAt+`, ev AS (
			SELECT e.id, e.xmin::text::bigint AS tx, e.on_hand - e.reserved AS free
			FROM stock_events e JOIN skus s ON s.id = e.sku_id WHERE s.code = $1 AND e.id > $2
		), last AS (
			SELECT DISTINCT ON (tx) tx, id, free FROM ev ORDER BY tx, id DESC
		)
		SELECT count(*) FROM last l JOIN offer_at o ON (o.ev IS NULL OR o.ev > l.id) AND o.quantity <= l.free`, sku, joinedThrough); n != 0 {
		t.Errorf("%d times a transaction committed with units free that a waiting entry fitted", n)
	}
	if n := b.sqlInt(t, `SELECT count(*) FROM stock_events WHERE seq IS NOT NULL`); n != 0 {
		t.Fatalf("%d events were published: their xmin no longer names the writing transaction", n)
	}
	// First fit in join order: when an entry was offered, every earlier one
	// still waiting needed more than was free at its turn.
	if n := b.sqlInt(t, offerAt+`
		SELECT count(*) FROM offer_at e JOIN offer_at f ON f.seq < e.seq
		WHERE e.ev IS NOT NULL AND f.quantity <= e.before AND (f.ev IS NULL OR f.ev > e.ev)`, sku); n != 0 {
		t.Errorf("%d offers went to an entry while an earlier one that fitted was still waiting", n)
	}
	// Plain reserves took only units no waiting entry fitted.
	if n := b.sqlInt(t, offerAt+`
		SELECT count(*) FROM stock_events p JOIN reservations r ON r.id = p.reservation_id
		JOIN offer_at o ON (o.ev IS NULL OR o.ev > p.id) AND o.quantity <= p.on_hand - p.reserved + 1
		WHERE p.cause = 'reserved' AND r.checkout_id LIKE 'plain-%'`, sku); n != 0 {
		t.Errorf("%d times a plain reserve took a unit while a waiting entry fitted it", n)
	}
	// Each offer is its own reservation, of the entry's quantity, for its checkout.
	if n := b.sqlInt(t, `
		SELECT count(*) FROM waitlist_entries w
		LEFT JOIN reservations r ON r.id = w.reservation_id
		LEFT JOIN reservation_lines rl ON rl.reservation_id = r.id
		WHERE w.status = 'offered' AND (r.id IS NULL OR r.checkout_id <> w.checkout_id OR r.request_key <> 'waitlist:' || w.id
		      OR rl.quantity IS DISTINCT FROM w.quantity
		      OR (SELECT count(*) FROM waitlist_entries o WHERE o.reservation_id = w.reservation_id) <> 1)`); n != 0 {
		t.Errorf("%d offers are not a reservation of their own", n)
	}
	b.requireInvariants(t)
}

// TestWaitlistJoinRacesRelease: a join and the release of the last held unit
// run at once, round after round. Whichever commits first, the unit never
// ends free while the entry waits for it: the join either sees it free
// (refused: reserve it) or is in line when the release offers it.
func TestWaitlistJoinRacesRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 40
	second := b.secondInstance(t)
	var refused, offered int
	for i := range rounds {
		sku := fmt.Sprintf("W-JR-%d", i)
		hold := b.soldOut(t, sku, "L1", 1)
		var joinErr, releaseErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, _, joinErr = b.join("joiner", sku, sku, "L1", 1) })
		wg.Go(func() {
			_, releaseErr = second.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther})
		})
		wg.Wait()
		if releaseErr != nil {
			t.Fatal(releaseErr)
		}
		switch {
		case joinErr == nil:
			offered++
		case isCode(joinErr, domain.CodeInvalidInput):
			refused++
		default:
			t.Fatalf("join: %v", joinErr)
		}
		if n := b.sqlInt(t, `
			SELECT count(*) FROM waitlist_entries w JOIN balances bal ON bal.sku_id = w.sku_id AND bal.location_id = w.location_id
			JOIN skus s ON s.id = w.sku_id
			WHERE s.code = $1 AND w.status = 'waiting' AND bal.on_hand - bal.reserved >= w.quantity`, sku); n != 0 {
			t.Fatalf("round %d: the entry waits while its unit is free", i)
		}
	}
	t.Logf("%d joins refused (release first), %d joined and offered", refused, offered)
	b.requireInvariants(t)
}

// TestWaitlistLeaveRacesOffer: the first entry leaves while a release offers
// the unit. Either it was offered (its leave then finds it OFFERED) or it
// left and the unit went to the second: never left with the unit free.
func TestWaitlistLeaveRacesOffer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 40
	second := b.secondInstance(t)
	var toFirst, toSecond int
	for i := range rounds {
		sku := fmt.Sprintf("W-LR-%d", i)
		hold := b.soldOut(t, sku, "L1", 1)
		first := b.mustJoin(t, "first", sku, sku, "L1", 1)
		next := b.mustJoin(t, "second", sku, sku, "L1", 1)
		var left domain.WaitlistEntry
		var leaveErr, releaseErr error
		var wg sync.WaitGroup
		wg.Go(func() { left, leaveErr = b.Store.WaitlistLeave(b.Ctx, domain.Scope{CheckoutID: "first"}, first.ID) })
		wg.Go(func() {
			_, releaseErr = second.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: hold.ID, Reason: domain.ReasonOther})
		})
		wg.Wait()
		if leaveErr != nil || releaseErr != nil {
			t.Fatal(leaveErr, releaseErr)
		}
		switch left.Status {
		case domain.WaitlistOffered:
			toFirst++
			b.requireWaiting(t, next)
		case domain.WaitlistLeft:
			toSecond++
			b.requireOffered(t, "L1", next)
		default:
			t.Fatalf("round %d: leave answered %+v", i, left)
		}
	}
	t.Logf("%d offered before the leave, %d left first", toFirst, toSecond)
	b.requireInvariants(t)
}

// TestWaitlistUnlocatedOffersFromTwoBalances: entries without a location wait
// for either of two locations, and units come back at both at once, round
// after round: two transactions, each holding its own balance, pick from the
// same line. They must queue for the entries, never wait on each other in a
// cycle (a code import is not retried on a deadlock), and each entry is
// offered once.
func TestWaitlistUnlocatedOffersFromTwoBalances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds, perRound = 30, 6
	// A second instance with a pool this test can empty: a backend's
	// deadlock count reaches pg_stat_database when it exits.
	pool, err := pgxpool.NewWithConfig(b.Ctx, b.Pool.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	second := testkit.NewStore(t, pool)
	before := b.deadlocksSoFar(t)
	for i := range rounds {
		sku := fmt.Sprintf("W-DL-%d", i)
		h1 := b.soldOut(t, sku, "L1", perRound)
		b.Stock(t, sku, "L2", perRound)
		h2 := b.mustCreate(t, "buyer", "all2-"+sku, 600, line(sku, "L2", perRound))
		for j := range 2 * perRound {
			b.mustJoin(t, fmt.Sprintf("w%d", j), sku, sku, "", 1)
		}
		var wg sync.WaitGroup
		var err1, err2 error
		wg.Go(func() {
			_, err1 = b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: h1.ID, Reason: domain.ReasonOther})
		})
		wg.Go(func() {
			_, err2 = second.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: h2.ID, Reason: domain.ReasonOther})
		})
		wg.Wait()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if n := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id WHERE s.code = $1 AND w.status = 'offered'`, sku); n != 2*perRound {
			t.Fatalf("round %d: %d entries offered, want all %d", i, n, 2*perRound)
		}
	}
	b.requireInvariants(t)
	pool.Reset()
	if after := b.deadlocksSoFar(t); after != before {
		t.Fatalf("%d deadlocks between offers from two balances of one SKU", after-before)
	}
}

// TestWaitlistConcurrentTwins: the same join sent eight times at once from
// two instances makes one entry; every answer names it, exactly one as a
// new join, the others as replays. The same checkout joining the same SKU
// with other keys at once gets one entry too, the rest ALREADY_EXISTS.
func TestWaitlistConcurrentTwins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.soldOut(t, "W-TWIN", "L1", 1)
	instances := []*store.Store{b.Store, b.secondInstance(t)}
	in := func(key string) domain.JoinWaitlistInput {
		return domain.JoinWaitlistInput{CheckoutID: "c1", RequestKey: key, SKU: "W-TWIN", Location: ptr("L1"), Quantity: 1, TTLSeconds: 600}
	}
	const n = 8
	ids := make([]string, n)
	replays := make([]bool, n)
	testkit.Writers(t, n, func(g int) error {
		e, replayed, err := instances[g%2].WaitlistJoin(b.Ctx, in("same"))
		ids[g], replays[g] = e.ID, replayed
		return err
	})
	fresh := 0
	for g := range n {
		if ids[g] != ids[0] {
			t.Fatalf("twin %d got entry %s, twin 0 %s", g, ids[g], ids[0])
		}
		if !replays[g] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d twins were told they joined, want 1", fresh)
	}
	b.RequireReconciled(t)
	if _, err := b.Store.WaitlistLeave(b.Ctx, domain.Scope{}, ids[0]); err != nil {
		t.Fatal(err)
	}
	var joined, exists atomic.Int64
	testkit.Writers(t, n, func(g int) error {
		_, _, err := instances[g%2].WaitlistJoin(b.Ctx, in(fmt.Sprintf("k%d", g)))
		switch {
		case err == nil:
			joined.Add(1)
		case isCode(err, domain.CodeAlreadyExists):
			exists.Add(1)
		default:
			return err
		}
		return nil
	})
	if joined.Load() != 1 || exists.Load() != n-1 {
		t.Fatalf("%d joined, %d ALREADY_EXISTS; want 1 and %d", joined.Load(), exists.Load(), n-1)
	}
	if c := b.sqlInt(t, `SELECT count(*) FROM waitlist_entries WHERE status = 'waiting'`); c != 1 {
		t.Fatalf("%d waiting entries, want 1", c)
	}
}
