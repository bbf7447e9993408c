package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestRiverUI: River's job UI answers at /riverui/ to admin keys only, and
// its API lists the expiry job a reserve scheduled.
func TestRiverUI(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 2)
	if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "k", "HP", 1))); err != nil {
		t.Fatal(err)
	}
	ts.requireAdminOnly("/riverui/", "<html")
	code, body := httpGetAs(t, ts.url+"/riverui/api/jobs?state=scheduled", ts.admin)
	if code != http.StatusOK || !strings.Contains(body, "reservation_expiry") {
		t.Fatalf("/riverui/api/jobs: %d %.300q", code, body)
	}
	if code, _ := httpGetAs(t, ts.url+"/riverui/api/jobs?state=scheduled", ""); code != http.StatusUnauthorized {
		t.Fatalf("anonymous /riverui/api/jobs: %d", code)
	}
}
