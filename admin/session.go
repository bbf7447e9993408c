package admin

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"inventory/auth"
	"inventory/domain"
)

// SessionHandler answers /admin/session: POST exchanges an admin key for the
// session cookie, DELETE signs out (ending the session on the server), GET
// says who is signed in. It runs after the authenticator. POST and DELETE
// are answered only to the dashboard's own pages (auth.FromDashboard): a
// cross-site form posting the attacker's key must not sign the admin's
// browser in as the attacker (login CSRF), nor another page sign it out.
func SessionHandler(sessions *auth.Sessions, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure := r.TLS != nil
		w.Header().Set("Cache-Control", "no-store")
		if (r.Method == http.MethodPost || r.Method == http.MethodDelete) && !auth.FromDashboard(r) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "signing in or out needs the " + auth.CSRFHeader + " header (send it from the /admin page)"})
			return
		}
		switch r.Method {
		case http.MethodPost:
			signIn(w, r, sessions, secure, logger)
		case http.MethodDelete:
			signOut(w, r, sessions, secure, logger)
		case http.MethodGet:
			actor := domain.ActorFrom(r.Context())
			if actor.Role != domain.RoleAdmin {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "not signed in"})
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"name": actor.Name})
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}
}

// signIn reads {"key": "inv_…"} and sets the session cookie for a live admin
// key; anything else is 401 with no cookie.
func signIn(w http.ResponseWriter, r *http.Request, sessions *auth.Sessions, secure bool, logger *slog.Logger) {
	var in struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `send {"key": "<admin key>"}`})
		return
	}
	cookie, err := sessions.SignIn(r.Context(), in.Key, secure)
	if errors.Is(err, auth.ErrNotAdminKey) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "that is not a live admin key"})
		return
	}
	if err != nil {
		logger.Error("admin sign-in", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "authentication unavailable, try again"})
		return
	}
	http.SetCookie(w, cookie)
	w.WriteHeader(http.StatusNoContent)
}

// signOut ends the cookie's session on the server, so a copy of the cookie
// stops working on every instance at once, and deletes it from the browser.
func signOut(w http.ResponseWriter, r *http.Request, sessions *auth.Sessions, secure bool, logger *slog.Logger) {
	value := ""
	if c, err := r.Cookie(auth.SessionCookie); err == nil {
		value = c.Value
	}
	cookie, err := sessions.SignOut(r.Context(), value, secure)
	if err != nil {
		logger.Error("admin sign-out", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the session could not be ended, try again"})
		return
	}
	http.SetCookie(w, cookie)
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
