package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMetricsAccess: on the API's port /metrics answers admin keys only
// (401 anonymous, 403 a service key); INVENTORY_METRICS_ADDR serves it to a
// scraper on a listener of its own without a key.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_METRICS_ADDR": "127.0.0.1:0", "INVENTORY_LOG_LEVEL": "info"})
	ts.requireAdminOnly("/metrics", "inventory_sweeper_released_total")
	var addr string
	waitUntil(t, 5*time.Second, "the metrics listener's address in the log", func() bool {
		m := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(ts.logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	if code, body := httpGet(t, "http://"+addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "inventory_sweeper_released_total") {
		t.Fatalf("metrics listener: %d %.200q", code, body)
	}
}

// requireAdminOnly GETs path as anonymous, service and admin: 401, 403, and
// 200 with a body containing want.
func (ts *testServer) requireAdminOnly(path, want string) {
	t := ts.t
	t.Helper()
	for _, c := range []struct {
		who, token string
		status     int
	}{{"anonymous", "", http.StatusUnauthorized}, {"service key", ts.service, http.StatusForbidden}, {"admin key", ts.admin, http.StatusOK}} {
		code, body := httpGetAs(t, ts.url+path, c.token)
		if code != c.status {
			t.Errorf("%s: %s answered %d, want %d", c.who, path, code, c.status)
		}
		if (code == http.StatusOK) != strings.Contains(body, want) {
			t.Errorf("%s: %s answered %d with %.200q", c.who, path, code, body)
		}
	}
}
