package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"inventory/domain"
)

// TestProxyRequestsWithoutClientSpendTheProxysBudget: behind trusted
// proxies, a request that names no client (a health check, a header that
// is not an address) spends its proxy's budget, not one shared by every
// such request of every proxy; a named client keeps its own.
func TestProxyRequestsWithoutClientSpendTheProxysBudget(t *testing.T) {
	t.Parallel()
	key := func(peer, xff string) string {
		r := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		r.RemoteAddr = peer
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		var k string
		clientIP([]string{"127.0.0.0/8"})(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			k = callerKey(r.Context(), domain.Anonymous)
		})).ServeHTTP(httptest.NewRecorder(), r)
		return k
	}
	a, a2, b := key("127.2.0.1:4000", ""), key("127.2.0.1:4001", "garbage"), key("127.2.0.2:4000", "")
	if a != a2 || a == b {
		t.Fatalf("proxy A: %q and %q, proxy B: %q; want A's two alike and B's its own", a, a2, b)
	}
	if c := key("127.2.0.1:4000", "198.51.100.7"); c != "ip:198.51.100.7" {
		t.Fatalf("a named client behind proxy A: %q", c)
	}
}
