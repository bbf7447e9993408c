package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// apiKeyPrefix marks admin and service secrets, so the authenticator can tell
// them from checkout tokens (JWTs) without trying both.
const apiKeyPrefix = "inv_"

// NewAPISecret returns a fresh random secret (256 bits) to show once, and the
// hash to store.
func NewAPISecret() (secret string, hash []byte) {
	buf := make([]byte, 32)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails on supported platforms
	secret = apiKeyPrefix + base64.RawURLEncoding.EncodeToString(buf)
	return secret, HashAPISecret(secret)
}

// HashAPISecret is the stored form of a secret. SHA-256 is enough: the secret
// has 256 bits of entropy, so there is nothing to brute-force.
func HashAPISecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

func isAPISecret(token string) bool { return strings.HasPrefix(token, apiKeyPrefix) }
