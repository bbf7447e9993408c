package auth

import (
	"context"
	"sync"
	"time"

	"inventory/domain"
)

// KeyCache answers API key lookups from memory for up to MaxAge, so an
// authenticated request costs no database read; only misses and entries older
// than MaxAge go to Keys. That bounds revocation: a key revoked on any
// instance is refused by every instance within MaxAge, because no instance
// trusts what it read longer than that.
//
// Only live keys are cached: an unknown or revoked secret is looked up every
// time, so the cache holds at most one entry per live key and cannot be grown
// by callers guessing secrets.
type KeyCache struct {
	Keys   KeyLookup
	MaxAge time.Duration

	mu      sync.Mutex
	entries map[string]cachedKey // by secret hash
}

type cachedKey struct {
	key     domain.APIKey
	fetched time.Time
}

// APIKeyGetBySecretHash implements KeyLookup with the cache in front of Keys.
func (c *KeyCache) APIKeyGetBySecretHash(ctx context.Context, secretHash []byte) (*domain.APIKey, error) {
	id := string(secretHash)
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && time.Since(e.fetched) < c.MaxAge {
		k := e.key
		return &k, nil
	}
	// The time is taken before the read, so an entry is never trusted beyond
	// MaxAge after the database said the key was live.
	fetched := time.Now()
	k, err := c.Keys.APIKeyGetBySecretHash(ctx, secretHash)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k == nil {
		delete(c.entries, id)
		return nil, nil
	}
	if c.entries == nil {
		c.entries = map[string]cachedKey{}
	}
	c.entries[id] = cachedKey{key: *k, fetched: fetched}
	return k, nil
}
