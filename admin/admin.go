// Package admin serves the operations dashboard at /admin: plain HTML, CSS
// and JavaScript embedded in the binary (no CDN, no build step), so it works
// on a machine with no internet access. The page talks to /graphql like any
// client; this package only serves it and exchanges an admin key for a
// session cookie (auth.Sessions), so the key itself never stays in the
// browser.
package admin

import (
	"embed"
	"io/fs"
	"net/http"

	"inventory/domain"
)

//go:embed assets
var assets embed.FS

// securityHeaders keep the page to its own origin: scripts, styles and
// connections (fetch and WebSocket) may only go to this server, and no other
// site may frame it (clickjacking the quick actions).
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// Page answers /admin: the dashboard to an admin (by session cookie, or a
// bearer key), only the sign-in form to anyone else. It runs after the
// authenticator.
func Page(w http.ResponseWriter, r *http.Request) {
	name := "assets/signin.html"
	if domain.ActorFrom(r.Context()).Role == domain.RoleAdmin {
		name = "assets/dashboard.html"
	}
	b, err := assets.ReadFile(name)
	if err != nil {
		http.Error(w, "missing page", http.StatusInternalServerError)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// Assets serves the page's scripts and styles; mount it at /admin/assets/
// with that prefix stripped. They hold nothing secret, so anyone may load them.
func Assets() http.Handler {
	sub, _ := fs.Sub(assets, "assets") // the directory is embedded, so Sub cannot fail
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		files.ServeHTTP(w, r)
	})
}
