package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/domain"
	"inventory/pgtest"
	"inventory/store"
	"inventory/testkit"
)

// evtIDs returns the skus and locations ids of a code pair, for tests that
// insert stock_events rows directly.
func (b *testBundle) evtIDs(t *testing.T, sku, loc string) (skuID, locID int64) {
	t.Helper()
	if err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT id FROM skus WHERE code = $1), (SELECT id FROM locations WHERE code = $2)`,
		sku, loc).Scan(&skuID, &locID); err != nil {
		t.Fatalf("ids of %s@%s: %v", sku, loc, err)
	}
	return skuID, locID
}

// evtSeqByID maps every stock_events id to its seq (0 while unpublished).
func (b *testBundle) evtSeqByID(t *testing.T) map[int64]int64 {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, `SELECT id, coalesce(seq, 0) FROM stock_events`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int64{}
	var id, seq int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error { out[id] = seq; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// StockEventsPublish numbers the committed unpublished events max(seq)+1, +2,
// … in id order, one NOTIFY per batch whose payload is the newest seq, at most
// limit per call, and returns 0 (without notifying) when nothing is pending.
func TestStockEventsPublishAssignsSeqInIDOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"P1", "P2", "P3"}, "PL")

	listener, err := pgx.Connect(b.Ctx, pgtest.DirectURL(t, b.Pool.Config().ConnConfig.ConnString())) // LISTEN needs a session
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(b.Ctx, "LISTEN "+domain.StockEventsChannel); err != nil {
		t.Fatal(err)
	}
	// notifications returns the payloads that arrive within a short wait.
	notifications := func() []string {
		t.Helper()
		var out []string
		for {
			ctx, cancel := context.WithTimeout(b.Ctx, 300*time.Millisecond)
			n, err := listener.WaitForNotification(ctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return out
				}
				t.Fatalf("WaitForNotification: %v", err)
			}
			if n.Channel != domain.StockEventsChannel {
				t.Fatalf("notification on %q", n.Channel)
			}
			out = append(out, n.Payload)
		}
	}
	publish := func(limit, want int) {
		t.Helper()
		n, err := b.Store.StockEventsPublish(b.Ctx, limit)
		if err != nil || n != want {
			t.Fatalf("StockEventsPublish(%d) = %d, %v; want %d", limit, n, err, want)
		}
	}

	publish(1000, 0)
	if got := notifications(); len(got) != 0 {
		t.Fatalf("publishing nothing notified %q", got)
	}
	if seq, err := b.Store.StockEventsLatest(b.Ctx); err != nil || seq != 0 {
		t.Fatalf("StockEventsLatest with nothing published = %d, %v", seq, err)
	}

	for i := range 7 {
		sku := []string{"P1", "P2", "P3"}[i%3]
		if _, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: "PL", Quantity: i + 1, Reference: nextRef("PO")}); err != nil {
			t.Fatal(err)
		}
	}
	publish(1000, 7)
	if got := notifications(); len(got) != 1 || got[0] != "7" {
		t.Fatalf("one batch of 7 sent notifications %q, want exactly [\"7\"]", got)
	}
	publish(1000, 0)
	if got := notifications(); len(got) != 0 {
		t.Fatalf("publishing nothing notified %q", got)
	}

	// Three more, published two and one: limit bounds a batch, seq
	// continues, one notification each.
	for i := range 3 {
		if _, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "P1", Location: "PL", Delta: 1, Reason: "r", Reference: "ref-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(2, 2)
	publish(2, 1)
	publish(2, 0)
	if got := notifications(); len(got) != 2 || got[0] != "9" || got[1] != "10" {
		t.Fatalf("two batches sent notifications %q, want [\"9\" \"10\"]", got)
	}

	rows := b.evtRowsAfter(t, 0)
	if len(rows) != 10 {
		t.Fatalf("%d events, want 10", len(rows))
	}
	for i, r := range rows {
		if r.Seq == nil || *r.Seq != int64(i+1) {
			t.Fatalf("event %d in id order is %v, want seq %d", i, r, i+1)
		}
	}
	if seq, err := b.Store.StockEventsLatest(b.Ctx); err != nil || seq != 10 {
		t.Fatalf("StockEventsLatest = %d, %v; want 10", seq, err)
	}
	got := b.Published(t, 0)
	seqs := make([]int64, len(got))
	for i, e := range got {
		seqs[i] = e.Seq
		r := rows[i]
		if e.SKU != r.SKU || e.Location != r.Location || string(e.Cause) != map[string]string{"received": "RECEIVED", "adjusted": "ADJUSTED"}[r.Cause] ||
			e.OnHand != r.OnHand || e.Reserved != r.Reserved || e.ReservationID != nil || e.CheckoutID != "" || e.At.IsZero() {
			t.Fatalf("StockEventsAfter returned %+v for row %v", e, r)
		}
	}
	evtRequireDense(t, "StockEventsAfter(0)", seqs, 1, 10)
	if page, err := b.Store.StockEventsAfter(b.Ctx, 4, 3); err != nil || len(page) != 3 || page[0].Seq != 5 || page[2].Seq != 7 {
		t.Fatalf("StockEventsAfter(4, 3) = %+v, %v", page, err)
	}
	if page, err := b.Store.StockEventsAfter(b.Ctx, 10, 5); err != nil || len(page) != 0 {
		t.Fatalf("StockEventsAfter(10) = %+v, %v", page, err)
	}
}

// An event inserted by a transaction that commits after transactions that
// inserted later still gets a seq, after theirs, and no gap: a reader that
// read between the relay's passes (at every point) gets every event exactly
// once, in seq order. Twelve raw transactions insert events in id order and
// commit in a shuffled order, with relay passes and reads in between.
func TestStockEventsPublishLateCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"LC"}, "LL")
	skuID, locID := b.evtIDs(t, "LC", "LL")

	// The simplest case first: tx1 inserts first and commits last.
	tx1, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(context.Background())
	tx2, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(context.Background())
	insert := func(tx pgx.Tx, marker int) int64 {
		t.Helper()
		var id int64
		if err := tx.QueryRow(b.Ctx, `INSERT INTO stock_events (sku_id, location_id, cause, on_hand, reserved) VALUES ($1, $2, 'adjusted', $3, 0) RETURNING id`,
			skuID, locID, marker).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	id1 := insert(tx1, 1)
	id2 := insert(tx2, 2)
	if id1 >= id2 {
		t.Fatalf("ids %d, %d are not in insert order", id1, id2)
	}
	if err := tx2.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	var read []domain.StockEvent
	cursor := int64(0)
	readNew := func() {
		t.Helper()
		page := b.Published(t, cursor)
		if len(page) > 0 {
			cursor = page[len(page)-1].Seq
		}
		read = append(read, page...)
	}
	if n, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil || n != 1 {
		t.Fatalf("publish with tx1 open: %d, %v; want 1 (tx2's event)", n, err)
	}
	readNew()
	if n, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil || n != 0 {
		t.Fatalf("publish again with tx1 open: %d, %v", n, err)
	}
	readNew()
	if err := tx1.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	readNew() // not published yet: nothing new
	if n, err := b.Store.StockEventsPublish(b.Ctx, 1000); err != nil || n != 1 {
		t.Fatalf("publish after tx1 committed: %d, %v; want 1", n, err)
	}
	readNew()
	if len(read) != 2 || read[0].Seq != 1 || read[0].OnHand != 2 || read[1].Seq != 2 || read[1].OnHand != 1 {
		t.Fatalf("reader got %+v, want tx2's event as seq 1 then tx1's as seq 2", read)
	}
	if m := b.evtSeqByID(t); m[id1] != 2 || m[id2] != 1 {
		t.Fatalf("seqs by id: %v", m)
	}

	// Twelve transactions, committed in a random order; the relay runs (or
	// not) and the reader reads after every commit.
	const n = 12
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	txs := make([]pgx.Tx, n)
	ids := make([]int64, n)
	for i := range n {
		if txs[i], err = b.Pool.Begin(b.Ctx); err != nil {
			t.Fatal(err)
		}
		defer txs[i].Rollback(context.Background())
		ids[i] = insert(txs[i], 100+i)
	}
	order := rng.Perm(n)
	t.Logf("commit order of the transactions (by insert order): %v", order)
	var committed []int // markers in commit order
	for k, i := range order {
		if err := txs[i].Commit(b.Ctx); err != nil {
			t.Fatal(err)
		}
		committed = append(committed, 100+i)
		if rng.IntN(3) > 0 || k == n-1 {
			if _, err := b.Store.StockEventsPublish(b.Ctx, 1+rng.IntN(3)); err != nil {
				t.Fatal(err)
			}
		}
		readNew()
	}
	for {
		p, err := b.Store.StockEventsPublish(b.Ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		readNew()
		if p == 0 {
			break
		}
	}
	seqs := make([]int64, len(read))
	for i, e := range read {
		seqs[i] = e.Seq
	}
	evtRequireDense(t, "the reader's seqs", seqs, 1, n+2)
	// Events are published in commit order when the relay runs after each
	// commit; batched ones in id order. Either way each marker appears once.
	seen := map[int]bool{}
	for _, e := range read[2:] {
		if seen[e.OnHand] {
			t.Fatalf("marker %d read twice: %+v", e.OnHand, read)
		}
		seen[e.OnHand] = true
	}
	for _, m := range committed {
		if !seen[m] {
			t.Fatalf("the event of the transaction with marker %d was never read: %+v", m, read)
		}
	}
	bySeq := b.evtSeqByID(t)
	for i, id := range ids {
		if bySeq[id] == 0 {
			t.Fatalf("event %d (transaction %d) has no seq", id, i)
		}
	}
}

// Eight relays publishing in a loop while eight writers change balances:
// no seq is assigned twice, none is skipped, the publishers' counts add up,
// two readers following the stream see exactly 1..N, and each balance's
// events come in the order its changes were made.
func TestStockEventsPublishConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	skus := []string{"CA", "CB", "CC", "CD"}
	b.Catalog(t, domain.KindQuantity, skus, "CL1", "CL2")

	const writers, perWriter, relays, readers = 8, 60, 8, 2
	var writing atomic.Bool
	writing.Store(true)
	var published atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+relays+readers)
	start := time.Now()
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			for i := range perWriter {
				// Every change adds one unit: a balance's on_hand in its
				// events must then count 1, 2, 3, … in seq order.
				sku, loc := skus[(w+i)%len(skus)], []string{"CL1", "CL2"}[i%2]
				var err error
				if i%3 == 0 {
					_, err = b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: 1, Reason: "r", Reference: nextRef("ref")})
				} else {
					_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: 1, Reference: nextRef("PO")})
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	for r := range relays {
		wg.Go(func() {
			for {
				done := !writing.Load()
				n, err := b.Store.StockEventsPublish(b.Ctx, 1+r*7)
				if err != nil {
					errs <- fmt.Errorf("relay %d: %w", r, err)
					return
				}
				published.Add(int64(n))
				if done && n == 0 {
					return
				}
			}
		})
	}
	readerSeqs := make([][]int64, readers)
	for r := range readers {
		wg.Go(func() {
			cursor := int64(0)
			for {
				done := !writing.Load()
				page, err := b.Store.StockEventsAfter(b.Ctx, cursor, 1+r*50)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				for _, e := range page {
					readerSeqs[r] = append(readerSeqs[r], e.Seq)
				}
				if len(page) > 0 {
					cursor = page[len(page)-1].Seq
				}
				if done && len(page) == 0 {
					// A last look once every relay is surely done.
					var pending int
					if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM stock_events WHERE seq IS NULL`).Scan(&pending); err != nil {
						errs <- err
						return
					}
					if pending == 0 {
						if page, err = b.Store.StockEventsAfter(b.Ctx, cursor, domain.MaxStockEventsPage); err != nil {
							errs <- err
							return
						}
						for _, e := range page {
							readerSeqs[r] = append(readerSeqs[r], e.Seq)
						}
						if len(page) == 0 {
							return
						}
						cursor = page[len(page)-1].Seq
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	writersWG.Wait()
	elapsed := time.Since(start)
	writing.Store(false)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var total, distinct, minSeq, maxSeq, unpublished int64
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(DISTINCT seq), coalesce(min(seq), 0), coalesce(max(seq), 0), count(*) FILTER (WHERE seq IS NULL)
		FROM stock_events`).Scan(&total, &distinct, &minSeq, &maxSeq, &unpublished); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events written by %d writers in %v while %d relays published; %d published by the relays", total, writers, elapsed, relays, published.Load())
	if total != writers*perWriter || unpublished != 0 || distinct != total || minSeq != 1 || maxSeq != total || published.Load() != total {
		t.Fatalf("%d events (want %d), %d unpublished, %d distinct seqs, seq %d..%d, relays reported %d",
			total, writers*perWriter, unpublished, distinct, minSeq, maxSeq, published.Load())
	}
	for r, seqs := range readerSeqs {
		evtRequireDense(t, fmt.Sprintf("reader %d", r), seqs, 1, total)
	}
	// Per balance, in seq order, on_hand counts up by one.
	all := b.Published(t, 0)
	next := map[string]int{}
	for _, e := range all {
		k := e.SKU + "@" + e.Location
		next[k]++
		if e.OnHand != next[k] {
			t.Fatalf("seq %d: %s on_hand %d, want %d: a balance's events are out of order", e.Seq, k, e.OnHand, next[k])
		}
	}
}

// Two stores on two pools (two server instances) relaying at once still
// assign every seq once: the advisory lock is held across instances.
func TestStockEventsPublishTwoInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Catalog(t, domain.KindQuantity, []string{"TI"}, "TL")
	// A second pool on the same database.
	cfg := b.Pool.Config().Copy()
	other, err := pgxpool.NewWithConfig(b.Ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	stores := []*store.Store{b.Store, testkit.NewStore(t, other)}

	const n = 300
	var wg sync.WaitGroup
	var writing atomic.Bool
	writing.Store(true)
	errs := make(chan error, 8)
	counts := make([]atomic.Int64, 2)
	for i, s := range stores {
		wg.Go(func() {
			for {
				done := !writing.Load()
				k, err := s.StockEventsPublish(b.Ctx, 5)
				if err != nil {
					errs <- err
					return
				}
				counts[i].Add(int64(k))
				if done && k == 0 {
					return
				}
			}
		})
	}
	var writersWG sync.WaitGroup
	for w := range 4 {
		writersWG.Go(func() {
			for range n / 4 {
				if _, err := stores[w%2].StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "TI", Location: "TL", Quantity: 1, Reference: nextRef("PO")}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	writersWG.Wait()
	writing.Store(false)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seqs := make([]int64, 0, n)
	for _, e := range b.Published(t, 0) {
		seqs = append(seqs, e.Seq)
		if e.OnHand != len(seqs) {
			t.Fatalf("seq %d has on_hand %d, want %d", e.Seq, e.OnHand, len(seqs))
		}
	}
	evtRequireDense(t, "published seqs", seqs, 1, n)
	t.Logf("instance 1 published %d, instance 2 published %d", counts[0].Load(), counts[1].Load())
	if counts[0].Load()+counts[1].Load() != n {
		t.Fatalf("the instances report %d + %d published, want %d", counts[0].Load(), counts[1].Load(), n)
	}
}
