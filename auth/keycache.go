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

	mu       sync.Mutex
	entries  map[string]cachedKey              // by secret hash
	unknown  *simplelru.LRU[string, time.Time] // secret hash → when it was read absent
	listed   map[string]struct{}               // live secret hashes at listedAt (KeyKnown)
	listedAt time.Time
	listing  sync.Mutex // held while listing the live keys

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

// LiveKeyLister lists the secret hashes of the live keys. store.Store is one.
type LiveKeyLister interface {
	APIKeySecretHashesLive(ctx context.Context) ([][]byte, error)
}

// KnownKeysRefresh is how often, at most, KeyKnown lists the live keys
// again: a key created on another instance is known here within this long.
// However many guesses arrive, that is one small read per interval.
const KnownKeysRefresh = 10 * time.Second

// KeyKnown says whether secretHash is a key this instance has seen live,
// or that was live when it last listed the keys (at most once per
// KnownKeysRefresh, and only if Keys is a LiveKeyLister). It never reads
// the database for the hash itself, so an address whose failed
// authentications are spent can still be served its valid keys while
// guessed ones cost nothing. Known is not authenticated: the key is still
// looked up (and may have been revoked since).
func (c *KeyCache) KeyKnown(ctx context.Context, secretHash []byte) bool {
	id := string(secretHash)
	c.mu.Lock()
	_, seen := c.entries[id]
	_, listed := c.listed[id]
	stale := time.Since(c.listedAt) >= KnownKeysRefresh
	c.mu.Unlock()
	if seen || listed || !stale {
		return seen || listed
	}
	lister, ok := c.Keys.(LiveKeyLister)
	if !ok {
		return false
	}
	c.listing.Lock() // one listing at a time; the rest wait for its result
	defer c.listing.Unlock()
	c.mu.Lock()
	stale = time.Since(c.listedAt) >= KnownKeysRefresh
	c.mu.Unlock()
	if stale {
		at := time.Now()
		hashes, err := lister.APIKeySecretHashesLive(ctx)
		if err == nil {
			set := make(map[string]struct{}, len(hashes))
			for _, h := range hashes {
				set[string(h)] = struct{}{}
			}
			c.mu.Lock()
			c.listed, c.listedAt = set, at
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, listed = c.listed[id]
	return listed
}
