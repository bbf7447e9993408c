package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
	"inventory/tracing"
)

// errTwinWon means another request with the same (checkout, key) committed
// first; the caller reads that one instead.
var errTwinWon = errors.New("a concurrent request with the same key won")

// ReservationCreate reserves a basket all-or-nothing in one transaction:
//
//  1. insert the reservation row. The UNIQUE (checkout_id, request_key) index
//     makes a concurrent twin wait here until the first commits or rolls back,
//     so two requests with one key never both claim stock. If the key already
//     names a reservation, roll back and return that one (a replay), read in a
//     fresh transaction so it is seen whatever the isolation level;
//  2. for a checkout token, lock the checkout and check its fair-use limits
//     against its live holds (lockCheckoutUsage);
//  3. schedule the job that expires the hold at its deadline (Store.Expiry);
//  4. claim every line with a conditional UPDATE, in (sku, location) order so
//     two baskets never wait on each other in a cycle.
//
// If a line cannot be had, everything rolls back and the allocation failure
// is recorded, for the health report.
//
// Concurrent single-line reserves at a named location are first offered to a
// batch (reserveCoalescer, reserveBatch) that makes many holds in one
// transaction with the same steps done set-based; what a batch cannot decide
// comes back here.
func (s *Store) ReservationCreate(ctx context.Context, in domain.ReserveInput) (domain.Reservation, bool, error) {
	if err := in.Validate(); err != nil {
		return domain.Reservation{}, false, err
	}
	fp := fingerprint(in)
	if coalescable(in) {
		q := &queuedReserve{in: in, fp: fp, actor: domain.ActorFrom(ctx).Name}
		if err := s.reserveBatches.submit(ctx, q); err != nil {
			return domain.Reservation{}, false, wrap("ReservationCreate", err)
		}
		switch o := q.outcome; o.route {
		case routeHeld:
			return o.res, false, nil
		case routeReplay:
			return s.replay(ctx, in, fp)
		case routeRefused:
			return domain.Reservation{}, false, o.err
		}
		res, replayed, err := s.reserveBasket(ctx, in, fp)
		if replayed && q.outcome.madeID != "" && res.ID == q.outcome.madeID {
			replayed = false // its own batch's commit landed; the answer was lost
		}
		return res, replayed, err
	}
	return s.reserveBasket(ctx, in, fp)
}

// reserveBasket is ReservationCreate for one request in a transaction of its
// own: any basket, and single lines a batch could not decide.
func (s *Store) reserveBasket(ctx context.Context, in domain.ReserveInput, fp []byte) (domain.Reservation, bool, error) {
	var res domain.Reservation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = domain.Reservation{CheckoutID: in.CheckoutID, RequestKey: in.RequestKey, Status: domain.StatusHeld}
		err := tx.QueryRow(ctx, `
			INSERT INTO reservations (checkout_id, request_key, fingerprint, expires_at)
			VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
			ON CONFLICT (checkout_id, request_key) DO NOTHING
			RETURNING id, expires_at, created_at`, in.CheckoutID, in.RequestKey, fp, in.TTLSeconds).Scan(&res.ID, &res.ExpiresAt, &res.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return errTwinWon
		}
		if err != nil {
			return err
		}
		if in.Limits != nil {
			skus := make([]string, len(in.Lines))
			for i, l := range in.Lines {
				skus[i] = l.SKU
			}
			usage, ids, err := lockCheckoutUsage(ctx, tx, []string{in.CheckoutID}, skus)
			if err != nil {
				return err
			}
			if err := fairUseError(in.Limits, usage[in.CheckoutID], in.Lines, ids); err != nil {
				return err
			}
		}
		if err := s.scheduleExpiry(ctx, tx, HoldDeadline{ReservationID: res.ID, At: res.ExpiresAt, TraceParent: tracing.TraceParent(ctx)}); err != nil {
			return err
		}
		// Claims last: from the first claim to commit the balance rows are
		// locked, and contended, so nothing else runs in between but the
		// lines' insert. The result is built from what was claimed rather
		// than read back.
		res.Lines, err = claimBasket(ctx, tx, reservationRef{id: res.ID, checkoutID: in.CheckoutID}, in.Lines)
		return err
	})
	if e, ok := domain.AsError(err); ok && e.Code == domain.CodeOutOfStock {
		// Nothing is held: the transaction rolled back. The refusal is counted
		// for the health report in a statement of its own, so the savepoint
		// it would otherwise need costs nothing on the hot path.
		if _, err := s.pool.Exec(ctx, `INSERT INTO allocation_failures (checkout_id, sku_id) SELECT $1, id FROM skus WHERE code = $2`,
			in.CheckoutID, e.SKU); err != nil {
			return domain.Reservation{}, false, wrap("ReservationCreate", err)
		}
		return domain.Reservation{}, false, err
	}
	if errors.Is(err, errTwinWon) {
		return s.replay(ctx, in, fp)
	}
	return res, false, wrap("ReservationCreate", err)
}

// replay returns the reservation that (checkout, key) already names, if it was
// made with the same inputs.
func (s *Store) replay(ctx context.Context, in domain.ReserveInput, fp []byte) (domain.Reservation, bool, error) {
	var res domain.Reservation
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var id string
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT id, fingerprint FROM reservations WHERE checkout_id = $1 AND request_key = $2`,
			in.CheckoutID, in.RequestKey).Scan(&id, &stored); err != nil {
			return err
		}
		if err := sameRequest(in.RequestKey, stored, fp); err != nil {
			return err
		}
		var err error
		res, err = loadReservation(ctx, tx, id)
		return err
	})
	if err != nil {
		return domain.Reservation{}, false, wrap("ReservationCreate.replay", err)
	}
	return res, true, nil
}

// sameRequest refuses a replay whose inputs (fingerprint fp) differ from
// those stored under its request key: IDEMPOTENCY_KEY_REUSED, for holds and
// waitlist joins alike.
func sameRequest(requestKey string, stored, fp []byte) error {
	if string(stored) == string(fp) {
		return nil
	}
	return &domain.Error{Code: domain.CodeIdempotencyKeyReused, Field: []string{"input", "requestKey"},
		Message: "requestKey " + strconv.Quote(requestKey) + " was already used for a different request; use a new key for new inputs"}
}

// fingerprint identifies a reserve request's inputs regardless of line order,
// so a retry that rebuilt the basket in another order is still a retry.
func fingerprint(in domain.ReserveInput) []byte {
	type line struct {
		SKU      string  `json:"s"`
		Location *string `json:"l"`
		Quantity int     `json:"q"`
	}
	lines := make([]line, len(in.Lines))
	for i, l := range in.Lines {
		lines[i] = line{l.SKU, l.Location, l.Quantity}
	}
	slices.SortFunc(lines, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.SKU, b.SKU), cmp.Compare(deref(a.Location), deref(b.Location)),
			cmp.Compare(boolInt(a.Location != nil), boolInt(b.Location != nil)), cmp.Compare(a.Quantity, b.Quantity))
	})
	b, _ := json.Marshal(struct {
		Lines []line `json:"lines"`
		TTL   int    `json:"ttl"`
	}{lines, in.TTLSeconds}) // plain structs: cannot fail
	sum := sha256.Sum256(b)
	return sum[:]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
