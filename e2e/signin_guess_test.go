package e2e

import (
	"fmt"
	"net/http"
	"testing"
)

// TestFailedSignInsLimitedPerIP: guessing admin keys at POST /admin/session
// spends the address's failed-authentication budget like a guessed bearer
// key. Before, 30 wrong keys from one address were 30 × 401 (only the
// anonymous write budget bounded them); now 5 × 401 and then 429. The budget
// bounds lookups of unknown keys, never a valid one: the right key signs in
// from the guessing address (it used to be 429 there until the window
// ended, so anyone sharing the admin's address locked the admin out), and
// from another address.
func TestFailedSignInsLimitedPerIP(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{
		"INVENTORY_RATE_LIMIT_AUTH_FAILURES":    "5",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES": "0",
		"INVENTORY_RATE_LIMIT_WINDOW":           "10m",
		"INVENTORY_TRUSTED_PROXIES":             "127.0.0.0/8",
	})
	signIn := func(key, from string) int {
		return request(t, http.MethodPost, ts.url+"/admin/session", "", from, "application/json", []byte(`{"key":"`+key+`"}`), csrfHeader)
	}
	statuses := map[int]int{}
	for i := range 30 {
		statuses[signIn(fmt.Sprintf("inv_guess%d", i), "203.0.113.7")]++
	}
	if statuses[http.StatusUnauthorized] != 5 || statuses[http.StatusTooManyRequests] != 25 {
		t.Fatalf("30 wrong sign-ins with 5 failures allowed: %v", statuses)
	}
	if s := signIn(ts.admin, "203.0.113.7"); s != http.StatusNoContent {
		t.Fatalf("the right key from the guessing address: %d, want 204", s)
	}
	if s := signIn("inv_guess-after", "203.0.113.7"); s != http.StatusTooManyRequests {
		t.Fatalf("another wrong key from the guessing address: %d, want 429", s)
	}
	if s := signIn(ts.admin, "198.51.100.9"); s != http.StatusNoContent {
		t.Fatalf("the right key from another address: %d", s)
	}
	if n := ts.count(`SELECT count(*) FROM admin_sessions`); n != 2 {
		t.Fatalf("%d sessions after two good sign-ins", n)
	}
}
