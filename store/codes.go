package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
	"inventory/domain"
)

var _ domain.Codes = (*Store)(nil)

// errNoKeyring is returned by code operations on a store wired without keys.
var errNoKeyring = errors.New("codes need INVENTORY_CODES_KEY and INVENTORY_CODES_HMAC_KEY")

// CodesImport stocks a batch of codes in one transaction, set-based so that
// 100,000 codes take seconds:
//
//  1. the batch row is inserted first; (sku, batch_ref) is unique, so the
//     same batch imported again (or concurrently) returns the first import's
//     counts and inserts nothing;
//  2. the lines are cleaned, sealed and fingerprinted in Go while they stream
//     into a temporary staging table with COPY;
//  3. one INSERT … SELECT DISTINCT ON (fingerprint) … ON CONFLICT DO NOTHING
//     moves them into codes: duplicates within the file and against stored
//     codes are counted, never inserted, and held or sold rows are never
//     touched;
//  4. on_hand rises by what was inserted, with its ledger row, and waiting
//     pre-orders are filled first-in-first-out from the new codes.
//
// There is no retry: the lines are consumed once. An error from lines (an
// unreadable file) rolls everything back.
func (s *Store) CodesImport(ctx context.Context, in domain.ImportCodesInput, lines iter.Seq2[string, error]) (domain.CodeBatch, error) {
	if err := in.Validate(); err != nil {
		return domain.CodeBatch{}, err
	}
	if s.Keyring == nil {
		return domain.CodeBatch{}, errNoKeyring
	}
	batch := domain.CodeBatch{BatchRef: in.BatchRef}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		k, err := resolveBalance(ctx, tx, in.SKU, in.Location)
		if err != nil {
			return err
		}
		if k.kind != domain.KindCodes {
			return &domain.Error{Code: domain.CodeInvalidInput, SKU: in.SKU, Field: []string{"input", "sku"},
				Message: "SKU " + in.SKU + " is a QUANTITY SKU: receive stock by count instead"}
		}
		// Imports of one SKU run one at a time: two imports sharing codes
		// would otherwise each wait on the other's new unique-index entries
		// (a deadlock). NO KEY UPDATE does not block the FK checks of
		// reservations and orders referencing the SKU.
		if _, err := tx.Exec(ctx, `SELECT FROM skus WHERE id = $1 FOR NO KEY UPDATE`, k.skuID); err != nil {
			return err
		}
		var batchID int64
		err = tx.QueryRow(ctx, `
			INSERT INTO code_batches (sku_id, location_id, batch_ref, actor) VALUES ($1, $2, $3, $4)
			ON CONFLICT (sku_id, batch_ref) DO NOTHING RETURNING id`,
			k.skuID, k.locationID, in.BatchRef, domain.ActorFrom(ctx).Name).Scan(&batchID)
		if errors.Is(err, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `
				SELECT received, inserted, duplicates, rejected, preorders_filled FROM code_batches
				WHERE sku_id = $1 AND batch_ref = $2`, k.skuID, in.BatchRef).
				Scan(&batch.Received, &batch.Inserted, &batch.Duplicates, &batch.Rejected, &batch.PreordersFilled)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE code_staging (line int, fingerprint bytea, ciphertext bytea, key_id text) ON COMMIT DROP`); err != nil {
			return err
		}
		src := &stagingSource{keys: s.Keyring, skuID: k.skuID, batch: &batch}
		src.next, src.stop = iter.Pull2(lines)
		defer src.stop()
		staged, err := tx.CopyFrom(ctx, pgx.Identifier{"code_staging"}, []string{"line", "fingerprint", "ciphertext", "key_id"}, src)
		if src.err != nil {
			return src.err // pgx reports it as a failed COPY; the cause is the file
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO codes (sku_id, location_id, batch_id, ciphertext, key_id, fingerprint)
			SELECT $1, $2, $3, ciphertext, key_id, fingerprint
			FROM (SELECT DISTINCT ON (fingerprint) * FROM code_staging ORDER BY fingerprint, line) first_seen
			ORDER BY line
			ON CONFLICT (sku_id, fingerprint) DO NOTHING`, k.skuID, k.locationID, batchID)
		if err != nil {
			return err
		}
		batch.Inserted = int(tag.RowsAffected())
		batch.Duplicates = int(staged) - batch.Inserted
		if batch.Inserted > 0 {
			// The balance, with the others of its SKU if the new codes may
			// go to an entry without a location (see lockLineStatement).
			if err := lockLine(ctx, tx, k); err != nil {
				return err
			}
			b, err := applyMovement(ctx, tx, k, movement{onHand: batch.Inserted, cause: "imported", reference: "batch " + in.BatchRef})
			if err != nil {
				return err
			}
			if b.PendingSupply > 0 {
				if batch.PreordersFilled, err = supplyArrived(ctx, tx, k, batch.Inserted); err != nil {
					return err
				}
			}
			// What pre-orders left goes to the line.
			if _, err := s.offerFreed(ctx, tx, freedAt(k)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `
			UPDATE code_batches SET received = $2, inserted = $3, duplicates = $4, rejected = $5, preorders_filled = $6
			WHERE id = $1`, batchID, batch.Received, batch.Inserted, batch.Duplicates, batch.Rejected, batch.PreordersFilled)
		return err
	})
	if err != nil {
		return domain.CodeBatch{}, wrap("CodesImport", err)
	}
	return batch, nil
}

// stagingSource feeds COPY: each accepted line becomes (line number,
// fingerprint, ciphertext, key id); rejected lines are only counted. The
// plaintext exists only between reading the line and sealing it.
type stagingSource struct {
	keys  *codecrypt.Keyring
	skuID int64
	batch *domain.CodeBatch

	next func() (string, error, bool)
	stop func()
	row  []any
	err  error
}

func (s *stagingSource) Next() bool {
	for {
		line, err, ok := s.next()
		if !ok {
			return false
		}
		if err != nil {
			s.err = &domain.Error{Code: domain.CodeInvalidInput, Field: []string{"input", "file"}, Message: "the code file cannot be read: " + err.Error()}
			return false
		}
		s.batch.Received++
		if s.batch.Received > domain.MaxImportLines {
			s.err = domain.InvalidInput([]string{"input"}, "an import takes at most %d lines", domain.MaxImportLines)
			return false
		}
		code, err := codecrypt.Clean(line)
		if err != nil {
			s.batch.Rejected++
			continue
		}
		sealed, keyID := s.keys.Seal(s.skuID, code)
		s.row = []any{int32(s.batch.Received), s.keys.Fingerprint(code), sealed, keyID}
		return true
	}
}

func (s *stagingSource) Values() ([]any, error) { return s.row, nil }
func (s *stagingSource) Err() error             { return s.err }

// CodesReveal returns the plaintext codes sold on an order line, oldest
// first, and records the reveal (who, when, which line, how many) in the same
// transaction: there is no way to read a code without leaving a record.
func (s *Store) CodesReveal(ctx context.Context, scope domain.Scope, orderLineID int64) ([]string, error) {
	if s.Keyring == nil {
		return nil, errNoKeyring
	}
	var codes []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var checkoutID string
		var selfConfirmed bool
		err := tx.QueryRow(ctx, `SELECT o.checkout_id, o.self_confirmed FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE ol.id = $1`,
			orderLineID).Scan(&checkoutID, &selfConfirmed)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !scope.Allows(checkoutID) {
			return &domain.Error{Code: domain.CodeNotFound, Message: "no order line " + strconv.FormatInt(orderLineID, 10)}
		}
		if err != nil {
			return err
		}
		if selfConfirmed {
			// Confirmed by the shopper's own token before that was refused:
			// no payment was vouched for, so its codes stay sealed.
			return fmt.Errorf("%w: codes are revealed only for orders a service or admin key confirmed", domain.ErrForbidden)
		}
		rows, err := tx.Query(ctx, `SELECT sku_id, key_id, ciphertext FROM codes WHERE order_line_id = $1 AND status = 'sold' ORDER BY id`, orderLineID)
		if err != nil {
			return err
		}
		var skuID int64
		var keyID string
		var sealed []byte
		codes = []string{}
		if _, err := pgx.ForEachRow(rows, []any{&skuID, &keyID, &sealed}, func() error {
			code, err := s.Keyring.Open(skuID, keyID, sealed)
			codes = append(codes, code)
			return err
		}); err != nil {
			return err
		}
		if len(codes) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO code_reveals (order_line_id, actor, codes) VALUES ($1, $2, $3)`,
			orderLineID, domain.ActorFrom(ctx).Name, len(codes))
		return err
	})
	if err != nil {
		return nil, wrap("CodesReveal", err)
	}
	return codes, nil
}

// CodesKeyCheck proves at start-up that the configured keys fit the stored
// codes: every key id in use must be configured, one code per key id must
// decrypt, and its fingerprint must match (else the HMAC key is wrong and
// dedupe would silently fail). A wrong key stops the server instead of
// returning garbage later.
func (s *Store) CodesKeyCheck(ctx context.Context) error {
	// One code per key id, found with a loose index scan over codes_key_idx
	// (each step jumps to the next key id), so start-up does not read every
	// code however many there are.
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE keys AS (
			(SELECT key_id FROM codes ORDER BY key_id LIMIT 1)
			UNION ALL
			SELECT (SELECT c.key_id FROM codes c WHERE c.key_id > keys.key_id ORDER BY c.key_id LIMIT 1)
			FROM keys WHERE keys.key_id IS NOT NULL
		)
		SELECT k.key_id, c.sku_id, c.ciphertext, c.fingerprint
		FROM keys k
		CROSS JOIN LATERAL (SELECT sku_id, ciphertext, fingerprint FROM codes WHERE key_id = k.key_id ORDER BY id LIMIT 1) c
		WHERE k.key_id IS NOT NULL`)
	if err != nil {
		return wrap("CodesKeyCheck", err)
	}
	var keyID string
	var skuID int64
	var sealed, fingerprint []byte
	_, err = pgx.ForEachRow(rows, []any{&keyID, &skuID, &sealed, &fingerprint}, func() error {
		if s.Keyring == nil {
			return errNoKeyring
		}
		code, err := s.Keyring.Open(skuID, keyID, sealed)
		if err != nil {
			return fmt.Errorf("stored codes use key %q: %w", keyID, err)
		}
		if string(s.Keyring.Fingerprint(code)) != string(fingerprint) {
			return errors.New("INVENTORY_CODES_HMAC_KEY does not match the one the stored codes were imported with")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("codes key check: %w", err)
	}
	return nil
}
