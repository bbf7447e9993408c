package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"inventory/domain"
)

var _ domain.Waitlists = (*Store)(nil)

// WaitlistJoin puts a checkout in line for a SKU, in one transaction:
//
//  1. resolve the SKU and location (UNKNOWN_SKU, UNKNOWN_LOCATION);
//  2. insert the entry. UNIQUE (checkout_id, request_key) makes a concurrent
//     twin wait here and then find the first, which is read back in a fresh
//     transaction (a replay, or IDEMPOTENCY_KEY_REUSED for other inputs), as
//     ReservationCreate does; the partial unique index on waiting entries
//     refuses a second live entry for the checkout and SKU (ALREADY_EXISTS);
//     the entry's expiry job goes in with it (Store.Expiry), and, for a
//     checkout token, the caps its offer will be bound by (an offer is a
//     hold: see offerStatement);
//  3. for a checkout token, lock the checkout (the lock its reserves take,
//     lockCheckoutUsage) and check its fair-use limits
//     (checkWaitlistFairUse);
//  4. lock the balance row(s) the entry waits on, in (sku, location) order,
//     and refuse (INVALID_INPUT, with the available count) if enough is free
//     now: reserve it instead.
//
// Why step 4 locks: every path that frees units offers them under the same
// balance lock before it commits. Holding it while deciding, a join either
// runs before a release (and is then offered by it: the release waits for the
// join to commit, then sees the entry) or after it (and sees the units free,
// and is refused: the locking read returns the row as the release left it).
// Without it, a join could commit waiting right after a release found nobody
// in line, leaving units free that it fits (TestWaitlistJoinRacesRelease).
//
// What is free counts stock only (on_hand - reserved - committed), not what
// could still
// be pre-ordered against expected supply: a shopper may wait for stock
// rather than pre-order.
func (s *Store) WaitlistJoin(ctx context.Context, in domain.JoinWaitlistInput) (domain.WaitlistEntry, bool, error) {
	if err := in.Validate(); err != nil {
		return domain.WaitlistEntry{}, false, err
	}
	fp := joinFingerprint(in)
	var entry domain.WaitlistEntry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		skuID, locID, err := resolveWaitTarget(ctx, tx, in.SKU, in.Location)
		if err != nil {
			return err
		}
		var id string
		var expiresAt time.Time
		// The caps that bind its offer, recorded: the offer is made by
		// whatever transaction frees units, with no token in sight.
		var maxHolds, maxUnits *int
		if in.Limits != nil {
			maxHolds, maxUnits = &in.Limits.MaxLiveHolds, &in.Limits.MaxUnitsPerSKU
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO waitlist_entries (checkout_id, request_key, fingerprint, sku_id, location_id, quantity, offer_ttl_seconds, expires_at,
			                              max_live_holds, max_units_per_sku)
			VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp() + make_interval(secs => $8), $9, $10)
			ON CONFLICT (checkout_id, request_key) DO NOTHING
			RETURNING id, expires_at`, in.CheckoutID, in.RequestKey, fp, skuID, locID, in.Quantity, in.Limits.OfferTTL(), in.TTLSeconds,
			maxHolds, maxUnits).Scan(&id, &expiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return errTwinWon
		}
		if isConstraint(err, "waitlist_entries_live_idx") {
			return &domain.Error{Code: domain.CodeAlreadyExists, SKU: in.SKU, Field: []string{"input", "sku"},
				Message: "checkout " + strconv.Quote(in.CheckoutID) + " is already waiting for " + in.SKU + "; leave that entry first"}
		}
		if err != nil {
			return err
		}
		if err := s.scheduleWaitlistExpiry(ctx, tx, EntryDeadline{EntryID: id, At: expiresAt}); err != nil {
			return err
		}
		if in.Limits != nil {
			if err := checkWaitlistFairUse(ctx, tx, in, skuID, id); err != nil {
				return err
			}
		}
		// Read before the balance lock: its position counts the line ahead
		// (a walk of up to the whole line), which under the lock made joins
		// to a long line queue one by one (210 joins/s with 10,000 waiting).
		// Entries ahead that are offered meanwhile make it one or two too
		// high, as any read of a moving line may be.
		if entry, err = loadEntry(ctx, tx, id); err != nil {
			return err
		}
		free, err := lockWaitFree(ctx, tx, skuID, locID)
		if err != nil {
			return err
		}
		if free >= in.Quantity {
			where := "across all locations"
			if in.Location != nil {
				where = "at " + *in.Location
			}
			return &domain.Error{Code: domain.CodeInvalidInput, SKU: in.SKU, Available: &free, Field: []string{"input", "quantity"},
				Message: fmt.Sprintf("%d of %s are available %s now, enough for %d: reserve them instead of waiting", free, in.SKU, where, in.Quantity)}
		}
		return notifyWaitlist(ctx, tx, id)
	})
	if errors.Is(err, errTwinWon) {
		return s.joinReplay(ctx, in, fp)
	}
	if err != nil {
		return domain.WaitlistEntry{}, false, wrap("WaitlistJoin", err)
	}
	return entry, false, nil
}

// isConstraint reports whether err is a violation of the named constraint or
// unique index.
func isConstraint(err error, name string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.ConstraintName == name
}

// resolveWaitTarget turns the SKU and optional location codes into ids.
// locID is nil for an entry that waits at whichever location frees units.
func resolveWaitTarget(ctx context.Context, tx pgx.Tx, sku string, location *string) (skuID int64, locID *int64, err error) {
	var sid *int64
	var lid *int64
	if err := tx.QueryRow(ctx, `SELECT (SELECT id FROM skus WHERE code = $1), (SELECT id FROM locations WHERE code = $2)`,
		sku, location).Scan(&sid, &lid); err != nil {
		return 0, nil, err
	}
	if sid == nil {
		return 0, nil, &domain.Error{Code: domain.CodeUnknownSKU, SKU: sku, Field: []string{"input", "sku"}, Message: "unknown SKU " + strconv.Quote(sku)}
	}
	if location != nil && lid == nil {
		return 0, nil, &domain.Error{Code: domain.CodeUnknownLocation, SKU: sku, Field: []string{"input", "location"}, Message: "unknown location " + strconv.Quote(*location)}
	}
	return *sid, lid, nil
}

// checkWaitlistFairUse checks a checkout token's entry against its limits,
// under the checkout's lock: what its live holds (offered ones included)
// hold of the SKU plus the entry's quantity within MaxUnitsPerSKU (the offer
// would be a hold), and its other waiting entries below MaxLiveHolds.
//
// The checkout's live holds in number do not refuse a join: a checkout at
// its cap may release one before units come back, and until it has, its
// entry is passed over, keeping its place (offerStatement). Every entry
// counts below MaxLiveHolds, so a checkout can never wait for more offers
// than the holds it may have.
func checkWaitlistFairUse(ctx context.Context, tx pgx.Tx, in domain.JoinWaitlistInput, skuID int64, id string) error {
	usage, _, err := lockCheckoutUsage(ctx, tx, []string{in.CheckoutID}, nil)
	if err != nil {
		return err
	}
	if err := in.Limits.CheckWaitlistUnits(in.SKU, usage[in.CheckoutID].units[skuID], in.Quantity); err != nil {
		return err
	}
	var live int
	if err := tx.QueryRow(ctx, `
		SELECT count(*) FROM waitlist_entries
		WHERE checkout_id = $1 AND status = 'waiting' AND expires_at > clock_timestamp() AND id <> $2`, in.CheckoutID, id).Scan(&live); err != nil {
		return err
	}
	return in.Limits.CheckWaitlistEntries(live)
}

// lockWaitFree locks the balance row(s) an entry waits on, in location id
// order (the global lock order), and returns what is free at the location,
// or summed over the SKU's locations (what a sourced reserve could take).
// A located balance row is created if missing, so that the first receipt
// there waits for this lock too. It takes the writers' lock: FOR SHARE
// would let joins run side by side, but concurrent joins under load then
// fail on lock_timeout, for a reason not yet understood.
func lockWaitFree(ctx context.Context, tx pgx.Tx, skuID int64, locID *int64) (int, error) {
	if locID != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO balances (sku_id, location_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, skuID, *locID); err != nil {
			return 0, err
		}
	}
	var free int
	err := tx.QueryRow(ctx, `
		SELECT coalesce(sum(free), 0)::int FROM (
			SELECT on_hand - reserved - committed AS free FROM balances
			WHERE sku_id = $1 AND ($2::bigint IS NULL OR location_id = $2)
			ORDER BY location_id
			FOR NO KEY UPDATE) b`, skuID, locID).Scan(&free)
	return free, err
}

// joinReplay returns the entry that (checkout, key) already names, if it was
// joined with the same inputs.
func (s *Store) joinReplay(ctx context.Context, in domain.JoinWaitlistInput, fp []byte) (domain.WaitlistEntry, bool, error) {
	var entry domain.WaitlistEntry
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		var id string
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT id, fingerprint FROM waitlist_entries WHERE checkout_id = $1 AND request_key = $2`,
			in.CheckoutID, in.RequestKey).Scan(&id, &stored); err != nil {
			return err
		}
		if err := sameRequest(in.RequestKey, stored, fp); err != nil {
			return err
		}
		var err error
		entry, err = loadEntry(ctx, tx, id)
		return err
	})
	if err != nil {
		return domain.WaitlistEntry{}, false, wrap("WaitlistJoin.replay", err)
	}
	return entry, true, nil
}

// joinFingerprint identifies a join request's inputs.
func joinFingerprint(in domain.JoinWaitlistInput) []byte {
	b, _ := json.Marshal(struct {
		SKU      string  `json:"s"`
		Location *string `json:"l"`
		Quantity int     `json:"q"`
		TTL      int     `json:"ttl"`
	}{in.SKU, in.Location, in.Quantity, in.TTLSeconds}) // plain struct: cannot fail
	sum := sha256.Sum256(b)
	return sum[:]
}

// WaitlistLeave ends a waiting entry: LEFT. An entry that already ended
// (offered, left, expired) is returned as it is; an offered entry's hold is a
// reservation, released as any other. A malformed id, an unknown one and one
// outside scope are all NOT_FOUND.
func (s *Store) WaitlistLeave(ctx context.Context, scope domain.Scope, id string) (domain.WaitlistEntry, error) {
	notFound := &domain.Error{Code: domain.CodeNotFound, Field: []string{"id"}, Message: "no waitlist entry has this id"}
	id, ok := canonicalUUID(id)
	if !ok {
		return domain.WaitlistEntry{}, notFound
	}
	var entry domain.WaitlistEntry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var checkoutID string
		err := tx.QueryRow(ctx, `SELECT checkout_id FROM waitlist_entries WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&checkoutID)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !scope.Allows(checkoutID) {
			return notFound
		}
		if err != nil {
			return err
		}
		// A waiting entry past its deadline expired, whether or not its
		// expiry ran: it ends EXPIRED, not LEFT.
		if _, err := tx.Exec(ctx, `
			UPDATE waitlist_entries
			SET status = CASE WHEN expires_at <= clock_timestamp() THEN 'expired' ELSE 'left' END, ended_at = now(), updated_at = now()
			WHERE id = $1 AND status = 'waiting'`, id); err != nil {
			return err
		}
		if err := notifyWaitlist(ctx, tx, id); err != nil {
			return err
		}
		entry, err = loadEntry(ctx, tx, id)
		return err
	})
	return entry, wrap("WaitlistLeave", err)
}

// WaitlistEntryGet reads an entry with its position in line; nil, nil when
// there is none or it is outside scope (a checkout cannot probe for others').
func (s *Store) WaitlistEntryGet(ctx context.Context, scope domain.Scope, id string) (*domain.WaitlistEntry, error) {
	id, ok := canonicalUUID(id)
	if !ok {
		return nil, nil
	}
	var out *domain.WaitlistEntry
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		e, err := loadEntry(ctx, tx, id)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !scope.Allows(e.CheckoutID) {
			return nil
		}
		out = &e
		return err
	})
	return out, wrap("WaitlistEntryGet", err)
}

// loadEntry reads one entry; pgx.ErrNoRows when there is none. A waiting
// entry past its deadline reads EXPIRED (its expiry may not have run yet);
// position counts the entries ahead of a waiting one that are still waiting
// and could take the same units (same location, or either one unlocated).
func loadEntry(ctx context.Context, q querier, id string) (domain.WaitlistEntry, error) {
	var e domain.WaitlistEntry
	var status string
	var position *int
	var skip entrySkip
	err := q.QueryRow(ctx, `
		SELECT w.id, w.checkout_id, w.request_key, s.code, l.code, w.quantity,
		       CASE WHEN w.status = 'waiting' AND w.expires_at <= clock_timestamp() THEN 'expired' ELSE w.status END,
		       w.joined_at, w.expires_at, w.reservation_id, w.offer_ttl_seconds, `+entrySkipColumns+`,
		       CASE WHEN w.status = 'waiting' AND w.expires_at > clock_timestamp() THEN
		           (SELECT count(*)::int FROM waitlist_entries o
		            WHERE o.sku_id = w.sku_id AND o.status = 'waiting' AND o.seq < w.seq AND o.expires_at > clock_timestamp()
		              AND (w.location_id IS NULL OR o.location_id IS NULL OR o.location_id = w.location_id))
		       END
		FROM waitlist_entries w
		JOIN skus s ON s.id = w.sku_id
		LEFT JOIN locations l ON l.id = w.location_id
		WHERE w.id = $1`, id).Scan(&e.ID, &e.CheckoutID, &e.RequestKey, &e.SKU, &e.Location, &e.Quantity, &status,
		&e.JoinedAt, &e.ExpiresAt, &e.ReservationID, &e.OfferTTLSeconds, &skip.reason, &skip.maxHolds, &skip.maxUnits, &position)
	e.Status = domain.WaitlistStatus(strings.ToUpper(status))
	e.Position = position
	e.SkippedReason = skip.text(e.SKU)
	return e, err
}

// entrySkipColumns are the columns of an entry (w) that entrySkip scans.
const entrySkipColumns = `w.skipped_reason, w.max_live_holds, w.max_units_per_sku`

// entrySkip is why an entry was passed over, as stored, with the caps its
// join recorded.
type entrySkip struct {
	reason             *string
	maxHolds, maxUnits *int
}

// text is the entry's SkippedReason: nil unless it was passed over.
func (k entrySkip) text(sku string) *string {
	if k.reason == nil {
		return nil
	}
	limit := k.maxHolds
	if *k.reason == domain.SkippedUnitsPerSKU {
		limit = k.maxUnits
	}
	if limit == nil {
		return nil
	}
	text := domain.WaitlistSkipReason(*k.reason, *limit, sku)
	return &text
}
