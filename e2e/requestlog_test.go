package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRequestLog: every request leaves one line with method, path,
// operation, status, duration, request id and role, and no line holds a
// token, a variable's value or a checkout id.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_LOG_LEVEL": "info"})
	ts.seed("HP-1", 5)
	if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-secret-7", "key-secret-9", "HP-1", 1))); err != nil {
		t.Fatal(err)
	}
	ts.gql("", `query Shelf { availability(skus: ["HP-1"]) { available } }`, nil)

	var lines []string
	waitUntil(t, 5*time.Second, "the request lines", func() bool {
		lines = nil
		for l := range strings.SplitSeq(ts.logs.String(), "\n") {
			if strings.Contains(l, "msg=request ") {
				lines = append(lines, l)
			}
		}
		return len(lines) >= 2
	})
	want := map[string][]string{
		"mutation reserve": {`method=POST`, `path=/graphql`, `operation="mutation reserve"`, `status=200`, `role=service`, `duration=`, `request_id=`},
		"Shelf":            {`operation=Shelf`, `status=200`, `role=anonymous`},
	}
	for op, parts := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, `operation="`+op+`"`) || strings.Contains(l, "operation="+op+" ") {
				found = true
				for _, p := range parts {
					if !strings.Contains(l, p) {
						t.Errorf("request line for %s lacks %q: %s", op, p, l)
					}
				}
			}
		}
		if !found {
			t.Errorf("no request line for %s in:\n%s", op, strings.Join(lines, "\n"))
		}
	}
	for _, secret := range []string{ts.service, ts.admin, "cart-secret-7", "key-secret-9"} {
		if strings.Contains(ts.logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
