package auth

import (
	"context"
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
	// Refused keys are not cached: each lookup reads again.
	before := table.reads.Load()
	for range 3 {
		if k, _ := c.APIKeyGetBySecretHash(t.Context(), hash); k != nil {
			t.Fatal("revoked key accepted")
		}
	}
	if n := table.reads.Load() - before; n != 3 {
		t.Fatalf("3 lookups of a refused key read %d times; want 3", n)
	}
}
