package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MaxRekeyBatch bounds CodesRekeyBatch: how many codes one transaction
// re-encrypts, and so how long it holds their balances' row locks.
const MaxRekeyBatch = 5000

// CodesKeyUsage counts the stored codes under each key id, so `inventory
// codes rekey` knows what is left and an operator can see that no code
// still needs a key before removing it from INVENTORY_CODES_KEY.
func (s *Store) CodesKeyUsage(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT key_id, count(*) FROM codes GROUP BY key_id`)
	if err != nil {
		return nil, wrap("CodesKeyUsage", err)
	}
	usage := map[string]int64{}
	var id string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { usage[id] = n; return nil })
	return usage, wrap("CodesKeyUsage", err)
}

// CodesRekeyBatch re-encrypts up to limit codes sealed under key fromKeyID
// with the current key, in one transaction, and returns how many it
// rewrote; 0 means none under fromKeyID is left (or every one left is locked
// by a transaction ending its hold: try again). Only ciphertext and key_id
// change: the plaintext, the fingerprint (the HMAC key never rotates), the
// status and every reference stay as they were, so a code is never lost or
// duplicated and the work can stop and resume at any batch.
//
// Online, with the lock order of the paths that touch codes:
//   - claims (reserve) and pre-order fills lock a balance row, then take its
//     available codes with SKIP LOCKED, counting on the balance lock to make
//     the claimable ones theirs. So available codes are rewritten under
//     their balances' locks, taken first in (sku, location) order like every
//     writer: a reserve on such a balance waits for this short transaction
//     instead of skipping codes it needs. Under the balance lock no other
//     transaction can lock an available code, so this never waits on one.
//   - ending a hold (confirm, release, expiry) locks its held codes, then its
//     balances. So held and sold codes are taken with SKIP LOCKED and no
//     balance lock: this transaction never waits on a code while holding
//     one, and cannot deadlock with them.
//
// Reveals read without locks and see the old or the new sealing, both of
// which open while fromKeyID is configured.
func (s *Store) CodesRekeyBatch(ctx context.Context, fromKeyID string, limit int) (int, error) {
	if s.Keyring == nil {
		return 0, wrap("CodesRekeyBatch", errNoKeyring)
	}
	current := s.Keyring.CurrentKeyID()
	if fromKeyID == current {
		return 0, nil
	}
	limit = max(1, min(limit, MaxRekeyBatch))
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		// Available codes: the balances of the oldest ones under the old
		// key (codes_key_idx), locked in order, then their codes.
		rows, err := tx.Query(ctx, `
			SELECT b.sku_id, b.location_id FROM balances b
			WHERE (b.sku_id, b.location_id) IN (
				SELECT sku_id, location_id FROM (
					SELECT sku_id, location_id FROM codes WHERE key_id = $1 AND status = 'available'
					ORDER BY key_id, id LIMIT $2) picked)
			ORDER BY b.sku_id, b.location_id
			FOR NO KEY UPDATE OF b`, fromKeyID, limit)
		if err != nil {
			return err
		}
		var skus, locs []int64
		var sku, loc int64
		if _, err := pgx.ForEachRow(rows, []any{&sku, &loc}, func() error {
			skus, locs = append(skus, sku), append(locs, loc)
			return nil
		}); err != nil {
			return err
		}
		var picked []sealedCode
		if len(skus) > 0 {
			rows, err = tx.Query(ctx, `
				SELECT id, sku_id, ciphertext FROM codes
				WHERE key_id = $1 AND status = 'available'
				  AND (sku_id, location_id) IN (SELECT * FROM unnest($3::bigint[], $4::bigint[]))
				ORDER BY key_id, id LIMIT $2
				FOR NO KEY UPDATE`, fromKeyID, limit, skus, locs)
			if picked, err = collectSealed(rows, picked); err != nil {
				return err
			}
		}
		// Held and sold codes: those no hold-ending transaction has locked.
		if room := limit - len(picked); room > 0 {
			rows, err = tx.Query(ctx, `
				SELECT id, sku_id, ciphertext FROM codes
				WHERE key_id = $1 AND status IN ('held', 'sold')
				ORDER BY key_id, id LIMIT $2
				FOR NO KEY UPDATE SKIP LOCKED`, fromKeyID, room)
			if picked, err = collectSealed(rows, picked); err != nil {
				return err
			}
		}
		if len(picked) == 0 {
			return nil
		}
		ids := make([]int64, len(picked))
		sealed := make([][]byte, len(picked))
		for i, c := range picked {
			code, err := s.Keyring.Open(c.skuID, fromKeyID, c.ciphertext)
			if err != nil {
				return fmt.Errorf("code %d: %w", c.id, err)
			}
			ids[i] = c.id
			sealed[i], _ = s.Keyring.Seal(c.skuID, code)
		}
		tag, err := tx.Exec(ctx, `
			UPDATE codes c SET ciphertext = u.ciphertext, key_id = $3
			FROM unnest($1::bigint[], $2::bytea[]) AS u(id, ciphertext)
			WHERE c.id = u.id AND c.key_id = $4`, ids, sealed, current, fromKeyID)
		if err != nil {
			return err
		}
		if int(tag.RowsAffected()) != len(ids) {
			return fmt.Errorf("rekey rewrote %d of %d locked codes", tag.RowsAffected(), len(ids))
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, wrap("CodesRekeyBatch", err)
	}
	return n, nil
}

// sealedCode is one code row as the rekey reads it.
type sealedCode struct {
	id, skuID  int64
	ciphertext []byte
}

// collectSealed appends rows of (id, sku_id, ciphertext) to into.
func collectSealed(rows pgx.Rows, into []sealedCode) ([]sealedCode, error) {
	var c sealedCode
	_, err := pgx.ForEachRow(rows, []any{&c.id, &c.skuID, &c.ciphertext}, func() error {
		into = append(into, sealedCode{id: c.id, skuID: c.skuID, ciphertext: append([]byte(nil), c.ciphertext...)})
		return nil
	})
	return into, err
}
