package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
)

// Webhook signing secrets are sealed at rest with the codes key ring
// (codecrypt.SealSecret), bound to their endpoint's id, so a database reader
// (a backup, a replica, a support query) cannot forge deliveries. Rows from
// before sealing existed hold the plaintext in secret/previous_secret until
// WebhookSecretsSeal moves it into the sealed columns.

// webhookSecretColumns are what webhookSecrets reads, in order.
const webhookSecretColumns = `secret, secret_sealed, secret_key_id,
	CASE WHEN previous_secret_until > now() THEN previous_secret END,
	CASE WHEN previous_secret_until > now() THEN previous_secret_sealed END,
	CASE WHEN previous_secret_until > now() THEN previous_secret_key_id END`

// sealedSecrets is one endpoint's secret columns as read.
type sealedSecrets struct {
	plain, prevPlain   *string
	sealed, prevSealed []byte
	keyID, prevKeyID   *string
}

func (c *sealedSecrets) dest() []any {
	return []any{&c.plain, &c.sealed, &c.keyID, &c.prevPlain, &c.prevSealed, &c.prevKeyID}
}

func webhookSecretContext(id string) string { return "webhook:" + id }

// open returns the secrets that sign endpoint id's deliveries: the current
// one, then the previous one during a rotation.
func (c *sealedSecrets) open(keys *codecrypt.Keyring, id string) ([]string, error) {
	one := func(plain *string, sealed []byte, keyID *string) (string, bool, error) {
		switch {
		case sealed != nil && keyID != nil:
			if keys == nil {
				return "", false, errNoKeyring
			}
			s, err := keys.OpenSecret(webhookSecretContext(id), *keyID, sealed)
			return s, true, err
		case plain != nil:
			return *plain, true, nil
		}
		return "", false, nil
	}
	cur, ok, err := one(c.plain, c.sealed, c.keyID)
	if err != nil || !ok {
		return nil, fmt.Errorf("webhook %s secret: %w", id, orMissing(err))
	}
	out := []string{cur}
	prev, ok, err := one(c.prevPlain, c.prevSealed, c.prevKeyID)
	if err != nil {
		return nil, fmt.Errorf("webhook %s previous secret: %w", id, err)
	}
	if ok {
		out = append(out, prev)
	}
	return out, nil
}

func orMissing(err error) error {
	if err == nil {
		return fmt.Errorf("none stored")
	}
	return err
}

// sealWebhookSecret seals secret for endpoint id under the current key.
func (s *Store) sealWebhookSecret(id, secret string) ([]byte, string, error) {
	if s.Keyring == nil {
		return nil, "", fmt.Errorf("webhook secrets: %w", errNoKeyring)
	}
	sealed, keyID := s.Keyring.SealSecret(webhookSecretContext(id), secret)
	return sealed, keyID, nil
}

// WebhookSecretsSeal seals every webhook secret still in plaintext, and
// re-seals under the current key every one sealed under an older key, in one
// transaction (endpoints are at most domain.MaxWebhookEndpoints), and returns
// how many endpoints it rewrote. The server runs it at start-up (so no
// plaintext secret outlives an upgrade) and `inventory codes rekey` runs it
// (so an old codes key can be retired). A secret sealed under a key that is
// not configured fails it: the server then refuses to start rather than
// sign nothing later. Concurrent runs (two instances starting) serialize on
// the row locks, and the second finds nothing left to do.
func (s *Store) WebhookSecretsSeal(ctx context.Context) (int, error) {
	if s.Keyring == nil {
		return 0, wrap("WebhookSecretsSeal", errNoKeyring)
	}
	current := s.Keyring.CurrentKeyID()
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `
			SELECT id::text, secret, secret_sealed, secret_key_id, previous_secret, previous_secret_sealed, previous_secret_key_id
			FROM webhook_endpoints
			WHERE secret IS NOT NULL OR previous_secret IS NOT NULL
			   OR secret_key_id IS DISTINCT FROM $1
			   OR (previous_secret_key_id IS NOT NULL AND previous_secret_key_id <> $1)
			ORDER BY id FOR NO KEY UPDATE`, current)
		if err != nil {
			return err
		}
		type resealed struct {
			id                 string
			sealed, prevSealed []byte
			prevKeyID          *string
		}
		var out []resealed
		var id string
		var c sealedSecrets
		_, err = pgx.ForEachRow(rows, []any{&id, &c.plain, &c.sealed, &c.keyID, &c.prevPlain, &c.prevSealed, &c.prevKeyID}, func() error {
			// open reads previous only while it is in use; here every
			// stored previous secret is kept (its expiry is unchanged).
			secrets, err := c.open(s.Keyring, id)
			if err != nil {
				return err
			}
			r := resealed{id: id}
			r.sealed, _ = s.Keyring.SealSecret(webhookSecretContext(id), secrets[0])
			if len(secrets) > 1 {
				r.prevSealed, _ = s.Keyring.SealSecret(webhookSecretContext(id), secrets[1])
				r.prevKeyID = &current
			}
			out = append(out, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range out {
			if _, err := tx.Exec(ctx, `
				UPDATE webhook_endpoints SET secret = NULL, secret_sealed = $2, secret_key_id = $3,
				       previous_secret = NULL, previous_secret_sealed = $4, previous_secret_key_id = $5
				WHERE id = $1::uuid`, r.id, r.sealed, current, r.prevSealed, r.prevKeyID); err != nil {
				return err
			}
		}
		n = len(out)
		return nil
	})
	if err != nil {
		return 0, wrap("WebhookSecretsSeal", err)
	}
	return n, nil
}
