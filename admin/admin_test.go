package admin_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestPageShowsDashboardOnlyToAdmins: /admin is the dashboard for an
// admin, by bearer key or session cookie, and only the sign-in form for
// anyone else (no caller, a service key, a cookie without proof of the
// dashboard's own request); every answer is uncached HTML that stays on
// its own origin and out of frames.
func TestPageShowsDashboardOnlyToAdmins(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cookie := e.signIn(e.url, e.adminKey)
	for _, c := range []struct {
		what      string
		cookie    *http.Cookie
		headers   map[string]string
		dashboard bool
	}{
		{"no caller", nil, nil, false},
		{"a service key", nil, bearer(e.serviceKey), false},
		{"an unknown key", nil, bearer("inv_unknown"), false},
		{"the cookie without proof of origin", cookie, nil, false},
		{"the admin key", nil, bearer(e.adminKey), true},
		{"the cookie on navigation", cookie, navigation, true},
	} {
		resp, body := e.do(http.MethodGet, e.url+"/admin", c.cookie, "", c.headers)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", c.what, resp.StatusCode)
		}
		dashboard := strings.Contains(body, "dashboard.js")
		signin := strings.Contains(body, `id="signin"`)
		if dashboard != c.dashboard || signin == c.dashboard {
			t.Fatalf("%s: dashboard %v, sign-in form %v; want the dashboard %v", c.what, dashboard, signin, c.dashboard)
		}
		requireSecurityHeaders(t, c.what, resp)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: Content-Type %q, Cache-Control %q", c.what, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
		}
	}
}

// assetRef is a script or stylesheet a page loads from /admin/assets/.
var assetRef = regexp.MustCompile(`(?:src|href)="(/admin/assets/[^"]+)"`)

// TestAssetsServeWhatThePagesLoad: every script and stylesheet the two
// pages load is served, to anyone, with its type and the pages' security
// headers; a name that is not an asset (or climbs out of the assets) is
// not found.
func TestAssetsServeWhatThePagesLoad(t *testing.T) {
	t.Parallel()
	e := setup(t)
	refs := map[string]bool{}
	for _, headers := range []map[string]string{nil, bearer(e.adminKey)} {
		_, page := e.do(http.MethodGet, e.url+"/admin", nil, "", headers)
		for _, m := range assetRef.FindAllStringSubmatch(page, -1) {
			refs[m[1]] = true
		}
	}
	for _, want := range []string{"/admin/assets/admin.css", "/admin/assets/signin.js", "/admin/assets/dashboard.js"} {
		if !refs[want] {
			t.Fatalf("the pages do not load %s (they load %v)", want, refs)
		}
	}
	for ref := range refs {
		resp, body := e.do(http.MethodGet, e.url+ref, nil, "", nil)
		typ := resp.Header.Get("Content-Type")
		wantType := "text/javascript"
		if strings.HasSuffix(ref, ".css") {
			wantType = "text/css"
		}
		if resp.StatusCode != http.StatusOK || len(body) == 0 || !strings.HasPrefix(typ, wantType) {
			t.Fatalf("%s: %d, %d bytes, %q", ref, resp.StatusCode, len(body), typ)
		}
		requireSecurityHeaders(t, ref, resp)
	}
	for _, path := range []string{"/admin/assets/missing.js", "/admin/assets/..%2fadmin.go", "/admin/assets/%2e%2e/session.go"} {
		resp, body := e.do(http.MethodGet, e.url+path, nil, "", nil)
		if resp.StatusCode == http.StatusOK || strings.Contains(body, "package admin") {
			t.Fatalf("%s: %d %.80s", path, resp.StatusCode, body)
		}
	}
}
