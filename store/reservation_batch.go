package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// Coalescing limits: how many batches run at once (each holds one
// connection) and how many requests one batch takes. A batch holds its
// balance rows for a few statements whatever its size, so larger batches
// raise a hot balance's ceiling; the bound keeps one transaction short.
const (
	reserveBatchLeaders = 4
	reserveBatchMax     = 256
	reserveBatchTimeout = 30 * time.Second
)

// coalescable says whether a reserve can be decided in a batch: one line at a
// named location, of either kind of SKU. Everything else (baskets, sourcing
// by priority) takes the basket path; so does any request the batch cannot
// decide.
func coalescable(in domain.ReserveInput) bool {
	return len(in.Lines) == 1 && in.Lines[0].Location != nil
}

// runReserveBatch decides a batch and records each request's outcome. A
// batch that fails as a whole sends every request down the basket path,
// where each gets its own transaction and its own error. ctx is the batch's
// own (see coalescer); cancelled, no request awaits the batch any more, so
// its rollback is not counted as a failure.
func (s *Store) runReserveBatch(ctx context.Context, batch []*queuedReserve) {
	outcomes, err := s.reserveBatch(ctx, batch)
	s.batchStats.batches.Add(1)
	s.batchStats.requests.Add(int64(len(batch)))
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		s.batchStats.failed.Add(1)
	}
	for i, q := range batch {
		if err != nil {
			// The batch may have committed with its answer lost (its
			// connection ended during the COMMIT): the basket path then
			// finds the row this request's batch made, which is its own
			// hold, not a replay.
			q.outcome = batchOutcome{route: routeBasket, madeID: outcomes[i].res.ID}
			continue
		}
		q.outcome = outcomes[i]
	}
}

// batchCounters count what coalescing did, for metrics and tests.
type batchCounters struct{ batches, requests, failed atomic.Int64 }

// ReservationBatchStats says what reserve coalescing did since the store was
// made: how many batches ran, how many requests they took (requests/batches
// is the mean batch size, which shows whether concurrent reserves are being
// coalesced), and how many batches failed as a whole. A failed batch loses
// nothing — its requests run one by one on the basket path — but it should
// not happen: a non-zero count points at a bug or at the database failing.
func (s *Store) ReservationBatchStats() (batches, requests, failed int64) {
	return s.batchStats.batches.Load(), s.batchStats.requests.Load(), s.batchStats.failed.Load()
}

// lockedBalance is a balance row a batch locked, with what it grants.
type lockedBalance struct {
	skuID, locationID int64
	kind              string
	onHand, reserved  int
	committed         int
	preorderable      int // pending_supply - preordered
	granted           int
}

// free is what the balance can still grant in this batch.
func (b *lockedBalance) free() int { return b.onHand - b.reserved - b.committed - b.granted }

// reserveBatch makes the holds of a batch of single-line reserves in one
// transaction, in three round trips whatever the batch size:
//
//  1. insert every request's reservation row (ON CONFLICT DO NOTHING: a key
//     that already names one is a replay, read after commit; the unique
//     index makes a concurrent twin in another transaction wait, as in the
//     basket path). A key twice in the batch is a replay of the first. The
//     rows are inserted in (checkout, key) order, not arrival order: each
//     insert holds its key until commit, so two batches (on two instances)
//     with twin keys in opposite orders would otherwise each wait for the
//     other — a deadlock until deadlock_timeout. Grants still go by arrival;
//  2. lock the checkouts that fair-use limits bind and read their live holds
//     (queueCheckoutUsage), then the batch's balance rows in (sku, location)
//     order, the one lock order of every writer — steps 1 and 2 are sent
//     together, and a request past a limit leaves the batch refused;
//  3. grant in arrival order while the balance has the units: the seeds'
//     conditional claim, decided on locked rows. A request that cannot be
//     granted from stock leaves the batch (its row is deleted): OUT_OF_STOCK
//     at once if the balance has nothing to pre-order either, else it runs
//     alone on the basket path, which may sell it as a pre-order;
//  4. one statement: each balance raised once by its grants, and per hold its
//     line, ledger row and stock event (carrying the balance as that hold
//     left it, in arrival order), and the refused rows deleted;
//  5. the expiry jobs, scheduled together in one insert (Store.Expiry).
//
// The CHECK constraints on balances still refuse anything that would oversell.
func (s *Store) reserveBatch(ctx context.Context, batch []*queuedReserve) ([]batchOutcome, error) {
	out := make([]batchOutcome, len(batch))
	err := s.inPipelinedTx(ctx, func(tx *pipelinedTx) error {
		clear(out) // a retried transaction decides afresh
		// Steps 1 and 2 in one round trip. The locks are taken for every
		// request, replays included, since which are replays is known only
		// from the insert's answer; a replay's locks cost a moment.
		b := &pgx.Batch{}
		made := queueBatchInsert(b, batch, out)
		usage := queueBatchCheckouts(b, batch)
		balances := queueBatchBalances(b, batch)
		if err := tx.SendBatch(ctx, b).Close(); err != nil || len(*made) == 0 {
			return err
		}
		s.inBatch("reserve", len(batch))
		var held, refused []int
		for _, i := range *made {
			l := batch[i].in.Lines[0]
			u := usage[batch[i].in.CheckoutID]
			b := balances[[2]string{l.SKU, *l.Location}]
			if limits := batch[i].in.Limits; limits != nil && b != nil {
				// Without a balance row the request goes to the basket
				// path below, which checks the limits itself.
				if err := fairUseError(limits, u, batch[i].in.Lines, map[string]int64{l.SKU: b.skuID}); err != nil {
					refused = append(refused, i)
					out[i].route, out[i].err = routeRefused, err
					continue
				}
			}
			// For a CODES SKU on_hand - reserved counts the available codes
			// (codes never commit), so the same test decides it; its codes
			// are claimed in step 4.
			if b == nil || b.free() < l.Quantity {
				// out[i].res keeps the row's id until it is deleted in step 4.
				refused = append(refused, i)
				out[i].route = routeBasket
				if b != nil && b.preorderable <= 0 {
					// Nothing to sell it as a pre-order either: the
					// basket path would only say the same.
					available := b.free()
					out[i].route = routeRefused
					out[i].err = outOfStockError(basketLine{sku: l.SKU, location: *l.Location,
						locationID: b.locationID, quantity: l.Quantity}, available)
				}
				continue
			}
			b.granted += l.Quantity
			if u != nil {
				u.holds++
				u.units[b.skuID] += l.Quantity
			}
			out[i].route = routeHeld
			out[i].res.Status = domain.StatusHeld
			out[i].res.Lines = []domain.ReservationLine{{SKU: l.SKU, Location: *l.Location, Quantity: l.Quantity}}
			held = append(held, i)
		}
		// The expiry jobs go first so that the apply, which raises the
		// balances, travels with the COMMIT: the balance rows' locks end one
		// round trip after their update.
		if len(held) > 0 {
			holds := make([]HoldDeadline, len(held))
			for j, i := range held {
				holds[j] = HoldDeadline{ReservationID: out[i].res.ID, At: out[i].res.ExpiresAt, TraceParent: traceParentOf(&batch[i].batchTurn)}
			}
			if err := s.scheduleExpiry(ctx, tx, holds...); err != nil {
				return err
			}
		}
		return applyBatchHolds(ctx, tx, batch, out, balances, held, refused)
	})
	return out, err
}

// queueBatchInsert queues the insert of a reservation row per request whose
// key is new; when b's results are read it records each made row in out,
// marks the others replays, and fills the returned indexes of the requests it
// made, in arrival order.
func queueBatchInsert(b *pgx.Batch, batch []*queuedReserve, out []batchOutcome) *[]int {
	type key struct{ checkout, request string }
	first := map[key]int{}
	var checkouts, keys []string
	var fps [][]byte
	var ttls []int32
	for i, q := range batch {
		k := key{q.in.CheckoutID, q.in.RequestKey}
		if _, dup := first[k]; dup {
			out[i].route = routeReplay
			continue
		}
		first[k] = i
		checkouts, keys, fps, ttls = append(checkouts, k.checkout), append(keys, k.request), append(fps, q.fp), append(ttls, int32(q.in.TTLSeconds))
	}
	idx := new([]int)
	b.Queue(`
		INSERT INTO reservations (checkout_id, request_key, fingerprint, expires_at)
		SELECT c, k, f, clock_timestamp() + make_interval(secs => t)
		FROM unnest($1::text[], $2::text[], $3::bytea[], $4::int[]) AS i(c, k, f, t)
		ORDER BY c COLLATE "C", k COLLATE "C"
		ON CONFLICT (checkout_id, request_key) DO NOTHING
		RETURNING id, checkout_id, request_key, expires_at, created_at`, checkouts, keys, fps, ttls).
		Query(func(rows pgx.Rows) error {
			made := make([]bool, len(batch))
			var r domain.Reservation
			if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.CheckoutID, &r.RequestKey, &r.ExpiresAt, &r.CreatedAt}, func() error {
				i := first[key{r.CheckoutID, r.RequestKey}]
				made[i] = true
				out[i].res = r
				return nil
			}); err != nil {
				return err
			}
			for i := range batch {
				if made[i] {
					*idx = append(*idx, i)
				} else {
					out[i].route = routeReplay // in the batch twice, or taken before it
				}
			}
			return nil
		})
	return idx
}

// queueBatchCheckouts queues the lock and usage of the checkouts that
// fair-use limits bind (queueCheckoutUsage); nil when none is bound.
func queueBatchCheckouts(b *pgx.Batch, batch []*queuedReserve) map[string]*checkoutUsage {
	var checkouts []string
	for _, q := range batch {
		if q.in.Limits != nil {
			checkouts = append(checkouts, q.in.CheckoutID)
		}
	}
	if len(checkouts) == 0 {
		return nil
	}
	return queueCheckoutUsage(b, checkouts)
}

// queueBatchBalances queues the lock of the balance rows the batch names, in
// (sku, location) order, keyed by their codes when b's results are read. A
// pair without a row (unknown SKU or location, or never stocked there) is
// absent.
func queueBatchBalances(b *pgx.Batch, batch []*queuedReserve) map[[2]string]*lockedBalance {
	skus, locs := make([]string, len(batch)), make([]string, len(batch))
	for i, q := range batch {
		skus[i], locs[i] = q.in.Lines[0].SKU, *q.in.Lines[0].Location
	}
	out := map[[2]string]*lockedBalance{}
	// The statement is the function's (migration 00019): its plan then
	// outlives the transaction also through a transaction pooler.
	b.Queue(`SELECT * FROM inventory_reserve_batch_lock($1::text[], $2::text[])`, skus, locs).
		Query(func(rows pgx.Rows) error {
			var b lockedBalance
			var sku, loc string
			_, err := pgx.ForEachRow(rows, []any{&b.skuID, &b.locationID, &sku, &loc, &b.kind, &b.onHand, &b.reserved, &b.committed, &b.preorderable}, func() error {
				c := b
				out[[2]string{sku, loc}] = &c
				return nil
			})
			return err
		})
	return out
}

// applyBatchHolds writes what the batch granted in one statement, sent with
// the transaction's COMMIT: each balance raised once, and per hold its line,
// ledger row, stock event and, for a CODES SKU, its codes marked held;
// refused requests' rows are deleted, and those refused as out of stock are
// counted as allocation failures (the health report's failure rate).
func applyBatchHolds(ctx context.Context, tx *pipelinedTx, batch []*queuedReserve, out []batchOutcome,
	balances map[[2]string]*lockedBalance, held, refused []int) error {
	var balSKU, balLoc []int64
	var balDelta []int32
	for _, b := range balances {
		if b.granted > 0 {
			balSKU, balLoc, balDelta = append(balSKU, b.skuID), append(balLoc, b.locationID), append(balDelta, int32(b.granted))
		}
	}
	n := len(held)
	ids, checkouts, actors := make([]string, n), make([]string, n), make([]string, n)
	skuIDs, locIDs := make([]int64, n), make([]int64, n)
	qty, onHand, reservedAfter, committed := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	isCodes := make([]bool, n)
	codeUnits := 0
	running := map[*lockedBalance]int{}
	for j, i := range held {
		l := batch[i].in.Lines[0]
		b := balances[[2]string{l.SKU, *l.Location}]
		running[b] += l.Quantity
		ids[j], checkouts[j], actors[j] = out[i].res.ID, batch[i].in.CheckoutID, batch[i].actor
		skuIDs[j], locIDs[j], qty[j] = b.skuID, b.locationID, int32(l.Quantity)
		onHand[j], reservedAfter[j], committed[j] = int32(b.onHand), int32(b.reserved+running[b]), int32(b.committed)
		if isCodes[j] = b.kind == "codes"; isCodes[j] {
			codeUnits += l.Quantity
		}
	}
	var gone, failedCheckouts []string
	var failedSKUs []int64
	for _, i := range refused {
		gone = append(gone, out[i].res.ID)
		if e, ok := domain.AsError(out[i].err); ok && e.Code == domain.CodeOutOfStock {
			l := batch[i].in.Lines[0]
			failedCheckouts = append(failedCheckouts, batch[i].in.CheckoutID)
			failedSKUs = append(failedSKUs, balances[[2]string{l.SKU, *l.Location}].skuID)
		}
	}
	// Codes: each CODES hold takes the next units of its balance in arrival
	// order (first_unit..first_unit+q-1), and the balance's oldest available
	// codes are numbered 0, 1, … (oldest batch first), so hold k gets exactly
	// the codes numbered in its range. The balance rows are locked, so no
	// other claimer takes these codes; SKIP LOCKED only keeps the claim from
	// waiting on rows some other statement has locked.
	// The statement is the function's (migration 00019), written out there:
	// its plan then outlives the transaction also through a transaction
	// pooler, where a statement sent from here is planned anew for every
	// batch. The codes it claims must be the units counted available: if
	// not, inventory_expect_count raises and the COMMIT is not run.
	batchHandoff(ctx)
	b := &pgx.Batch{}
	b.Queue(`SELECT inventory_expect_count(inventory_reserve_batch_apply($1::bigint[], $2::bigint[], $3::int[],
		$4::uuid[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::int[], $10::int[], $11::int[], $12::int[],
		$13::uuid[], $14::text[], $15::bigint[], $16::bool[]), $17::bigint, 'codes balance')`,
		balSKU, balLoc, balDelta, ids, checkouts, actors, skuIDs, locIDs, qty, onHand, reservedAfter, committed, gone, failedCheckouts, failedSKUs, isCodes, codeUnits)
	err := tx.commitWith(ctx, b)
	if pgCode(err) == pgNumericOutOfRange {
		return domain.InvalidInput([]string{"input"}, "the change would take the balance past its maximum of 2147483647")
	}
	return err
}
