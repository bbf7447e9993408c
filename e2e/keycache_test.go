package e2e

import (
	"testing"
	"time"
)

// waitRefused polls the instance at url with token until it answers
// UNAUTHENTICATED, failing the test if that takes longer than within.
func (ts *testServer) waitRefused(url, token string, within time.Duration) time.Duration {
	ts.t.Helper()
	start := time.Now()
	for {
		r, err := gqlTo(url, token, `{ checkoutReservations(checkoutId: "cart-1") { id } }`, nil)
		if err != nil {
			ts.t.Fatal(err)
		}
		if r.errorCode() == "UNAUTHENTICATED" {
			return time.Since(start)
		}
		if time.Since(start) > within {
			ts.t.Fatalf("revoked key still accepted by %s after %v: %+v", url, within, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRevokedKeyRefusedWithinASecondEverywhere warms the key cache of two
// instances with a service key, revokes the key through the CLI (the database,
// not either instance), and requires both instances to refuse it within a
// second, while a key that stays live keeps working throughout.
func TestRevokedKeyRefusedWithinASecondEverywhere(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	second, _ := ts.startInstance()
	for _, url := range []string{ts.url, second} {
		for range 20 { // warm: these are served from the cache
			if r, err := gqlTo(url, ts.service, `{ checkoutReservations(checkoutId: "cart-1") { id } }`, nil); err != nil || len(r.Errors) > 0 {
				t.Fatalf("live key refused: %v %+v", err, r)
			}
		}
	}
	ts.cli("token", "revoke", "test-service")
	for _, url := range []string{ts.url, second} {
		took := ts.waitRefused(url, ts.service, time.Second)
		t.Logf("%s refused the revoked key %v after revocation", url, took.Round(time.Millisecond))
	}
	if r, err := gqlTo(second, ts.admin, `{ reconciliation { kind } }`, nil); err != nil || len(r.Errors) > 0 {
		t.Fatalf("the admin key stopped working: %v %+v", err, r)
	}
}
