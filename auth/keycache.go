package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"inventory/domain"
)

// KeyCache answers API key lookups from memory for up to MaxAge, so an
// authenticated request costs no database read; only misses and entries older
// than MaxAge go to Keys. That bounds revocation: a key revoked on any
// instance is refused by every instance within MaxAge, because no instance
// trusts what it read longer than that.
//
// An unknown or revoked secret is remembered too, for UnknownKeyTTL, in a
// table of at most UnknownKeyEntries (least recently used out first): a
// client repeating a dead key costs one read per UnknownKeyTTL, not one per
// request, and one guessing new secrets cannot grow memory without end (the
// per-address failure limit bounds how fast it can try). Remembering an
// unknown secret can never refuse a live key: a secret is random, and a
// revoked key stays revoked.
type KeyCache struct {
	Keys   KeyLookup
	MaxAge time.Duration

	mu      sync.Mutex
	entries map[string]cachedKey              // by secret hash
	unknown *simplelru.LRU[string, time.Time] // secret hash → when it was read absent

	readsLive, readsUnknown atomic.Int64
}

// DatabaseReads counts the lookups that went to Keys, by what they found.
func (c *KeyCache) DatabaseReads() (live, unknown int64) {
	return c.readsLive.Load(), c.readsUnknown.Load()
}

// UnknownKeyTTL is how long a secret the database did not know is refused
// from memory; UnknownKeyEntries how many such secrets are remembered
// (about 100 bytes each).
const (
	UnknownKeyTTL     = 5 * time.Second
	UnknownKeyEntries = 10_000
)

type cachedKey struct {
	key     domain.APIKey
	fetched time.Time
}

// APIKeyGetBySecretHash implements KeyLookup with the cache in front of Keys.
func (c *KeyCache) APIKeyGetBySecretHash(ctx context.Context, secretHash []byte) (*domain.APIKey, error) {
	id := string(secretHash)
	c.mu.Lock()
	e, ok := c.entries[id]
	var absentSince time.Time
	if !ok && c.unknown != nil {
		absentSince, _ = c.unknown.Get(id)
	}
	c.mu.Unlock()
	if ok && time.Since(e.fetched) < c.MaxAge {
		k := e.key
		return &k, nil
	}
	if !absentSince.IsZero() && time.Since(absentSince) < UnknownKeyTTL {
		return nil, nil
	}
	// The time is taken before the read, so an entry is never trusted beyond
	// MaxAge after the database said the key was live.
	fetched := time.Now()
	k, err := c.Keys.APIKeyGetBySecretHash(ctx, secretHash)
	if err != nil {
		return nil, err
	}
	if k == nil {
		c.readsUnknown.Add(1)
	} else {
		c.readsLive.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k == nil {
		delete(c.entries, id)
		if c.unknown == nil {
			c.unknown, _ = simplelru.NewLRU[string, time.Time](UnknownKeyEntries, nil) // fails only for a size < 1
		}
		c.unknown.Add(id, fetched)
		return nil, nil
	}
	if c.unknown != nil {
		c.unknown.Remove(id)
	}
	if c.entries == nil {
		c.entries = map[string]cachedKey{}
	}
	c.entries[id] = cachedKey{key: *k, fetched: fetched}
	return k, nil
}
