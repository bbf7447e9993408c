package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// MaxTokenSecrets bounds the INVENTORY_TOKEN_SECRET key ring: a token whose
// key id is unknown (or one minted before key ids) is tried against every
// key, so the ring stays short. Two are enough for a rotation.
const MaxTokenSecrets = 4

// tokenKey is one INVENTORY_TOKEN_SECRET entry. id names it in every
// checkout token (the JWS "kid") and admin session cookie it signs, so a
// verifier picks the key directly; it is derived from the secret (a keyed
// hash, revealing nothing of it), so an operator never has to name keys and
// every instance given the same secret computes the same id.
type tokenKey struct {
	id     string
	secret []byte
}

// ParseTokenSecrets reads INVENTORY_TOKEN_SECRET: one secret, or a
// comma-separated ring "new,old" during a rotation. The first signs; every
// one listed verifies. Each is at least MinSecretLength bytes once
// surrounding spaces are trimmed. A single secret configured before key
// rings existed reads as a ring of one, and tokens it signed keep verifying
// while it stays listed; a secret with a comma in it (never one from
// openssl rand -hex or -base64) would read as two entries and must be
// replaced.
func ParseTokenSecrets(v string) ([][]byte, error) {
	parts := strings.Split(v, ",")
	if len(parts) > MaxTokenSecrets {
		return nil, fmt.Errorf("INVENTORY_TOKEN_SECRET lists %d secrets, at most %d", len(parts), MaxTokenSecrets)
	}
	secrets := make([][]byte, 0, len(parts))
	seen := map[string]bool{}
	for i, p := range parts {
		secret := []byte(strings.TrimSpace(p))
		if len(secret) < MinSecretLength {
			what := "INVENTORY_TOKEN_SECRET"
			if len(parts) > 1 {
				what = fmt.Sprintf("INVENTORY_TOKEN_SECRET entry %d (entries are comma-separated)", i+1)
			}
			return nil, fmt.Errorf("%s must be at least %d bytes, got %d (e.g. openssl rand -hex 32)", what, MinSecretLength, len(secret))
		}
		if seen[string(secret)] {
			return nil, fmt.Errorf("INVENTORY_TOKEN_SECRET entry %d repeats an earlier one", i+1)
		}
		seen[string(secret)] = true
		secrets = append(secrets, secret)
	}
	return secrets, nil
}

// tokenKeyID is the first 9 bytes of HMAC-SHA256(secret, label), base64url:
// 12 characters, no dots, unique in any ring an operator would write.
func tokenKeyID(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("inventory token key id v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:9])
}

// keyRing turns secrets (the first signs) into keys with their ids.
func keyRing(secrets [][]byte) ([]tokenKey, error) {
	if len(secrets) == 0 || len(secrets) > MaxTokenSecrets {
		return nil, fmt.Errorf("auth: want 1 to %d token secrets, got %d", MaxTokenSecrets, len(secrets))
	}
	keys := make([]tokenKey, 0, len(secrets))
	for _, s := range secrets {
		if len(s) < MinSecretLength {
			return nil, fmt.Errorf("auth: token secret must be at least %d bytes, got %d", MinSecretLength, len(s))
		}
		keys = append(keys, tokenKey{id: tokenKeyID(s), secret: s})
	}
	return keys, nil
}
