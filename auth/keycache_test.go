package auth

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inventory/domain"
)

// keyTable is an in-memory key table that counts reads. The revocation
// guarantee across real instances is tested over HTTP in the root package;
// this checks how often the cache reads.
type keyTable struct {
	reads   atomic.Int64
	mu      sync.Mutex
	revoked bool
}

func (k *keyTable) APIKeyGetBySecretHash(context.Context, []byte) (*domain.APIKey, error) {
	k.reads.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.revoked {
		return nil, nil
	}
	return &domain.APIKey{Name: "k", Role: domain.RoleService}, nil
}

func TestKeyCacheReadsOncePerMaxAge(t *testing.T) {
	t.Parallel()
	table := &keyTable{}
	c := &KeyCache{Keys: table, MaxAge: 200 * time.Millisecond}
	hash := HashAPISecret("inv_x")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if k, err := c.APIKeyGetBySecretHash(t.Context(), hash); err != nil || k == nil || k.Name != "k" {
					t.Errorf("lookup = %v, %v", k, err)
				}
			}
		})
	}
	wg.Wait()
	if n := table.reads.Load(); n < 1 || n > 8 {
		t.Fatalf("800 lookups within MaxAge read the table %d times; want 1..8 (one per racing first caller)", n)
	}

	table.mu.Lock()
	table.revoked = true
	table.mu.Unlock()
	deadline := time.Now().Add(c.MaxAge + 50*time.Millisecond)
	for {
		k, err := c.APIKeyGetBySecretHash(t.Context(), hash)
		if err != nil {
			t.Fatal(err)
		}
		if k == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("revoked key still accepted after MaxAge")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A refused key is remembered: lookups within UnknownKeyTTL read nothing.
	before := table.reads.Load()
	for range 3 {
		if k, _ := c.APIKeyGetBySecretHash(t.Context(), hash); k != nil {
			t.Fatal("revoked key accepted")
		}
	}
	if n := table.reads.Load() - before; n != 0 {
		t.Fatalf("3 lookups of a refused key within UnknownKeyTTL read %d times; want 0", n)
	}
	if live, unknown := c.DatabaseReads(); unknown < 1 || live < 1 {
		t.Fatalf("DatabaseReads = %d live, %d unknown", live, unknown)
	}
}

// TestKeyCacheUnknownKeysBounded: a caller guessing ever new secrets
// cannot grow the cache past UnknownKeyEntries, and a remembered unknown
// secret that is then read live (it cannot happen with random secrets, but
// the cache must not lie) is live.
func TestKeyCacheUnknownKeysBounded(t *testing.T) {
	t.Parallel()
	table := &keyTable{revoked: true}
	c := &KeyCache{Keys: table, MaxAge: time.Minute}
	for i := range UnknownKeyEntries + 500 {
		if k, err := c.APIKeyGetBySecretHash(t.Context(), HashAPISecret(fmt.Sprint("inv_guess", i))); k != nil || err != nil {
			t.Fatalf("guess %d: %v %v", i, k, err)
		}
	}
	c.mu.Lock()
	n := c.unknown.Len() + len(c.entries)
	c.mu.Unlock()
	if n > UnknownKeyEntries {
		t.Fatalf("%d entries after %d guesses, want at most %d", n, UnknownKeyEntries+500, UnknownKeyEntries)
	}
	// The oldest guess was evicted: it reads again.
	before := table.reads.Load()
	_, _ = c.APIKeyGetBySecretHash(t.Context(), HashAPISecret("inv_guess0"))
	if table.reads.Load() != before+1 {
		t.Fatal("the least recently used unknown secret was not evicted")
	}
}

// listedKeys is a key table that also lists its live hashes, counting lists.
type listedKeys struct {
	keyTable
	lists atomic.Int64
	live  [][]byte
}

func (k *listedKeys) APIKeySecretHashesLive(context.Context) ([][]byte, error) {
	k.lists.Add(1)
	return k.live, nil
}

// TestKeyKnownListsOncePerRefresh: 1,600 concurrent questions about
// guessed keys list the live keys once (not once per guess, and never a
// read per hash), a listed key is known without having been served, and
// a guessed one is not.
func TestKeyKnownListsOncePerRefresh(t *testing.T) {
	t.Parallel()
	live := HashAPISecret("inv_live")
	table := &listedKeys{live: [][]byte{live}}
	c := &KeyCache{Keys: table, MaxAge: time.Second}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 100 {
				if c.KeyKnown(t.Context(), HashAPISecret(fmt.Sprintf("inv_guess%d-%d", g, i))) {
					t.Errorf("a guessed key is known")
				}
			}
		})
	}
	wg.Wait()
	if !c.KeyKnown(t.Context(), live) {
		t.Fatal("a live key is not known")
	}
	if n, reads := table.lists.Load(), table.reads.Load(); n != 1 || reads != 0 {
		t.Fatalf("1,601 questions listed the keys %d times and read %d hashes; want 1 and 0", n, reads)
	}
}
