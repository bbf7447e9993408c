package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/httprate"

	"inventory/auth"
	"inventory/domain"
)

// authGuard is the authenticator behind a per-address budget of failed
// authentications (RateLimits.AuthFailures): a client that keeps sending
// tokens that do not authenticate — guessed keys, forged or garbled
// checkout tokens — is refused before its next token is even looked up, so
// guessing costs neither database reads nor CPU beyond the budget.
//
// While an address's budget is spent, every request from it that carries
// an Authorization header is refused, a valid token included (the guard
// cannot tell which is which without checking); requests without a token
// go on as anonymous callers with their own budgets. An expired checkout
// token is not a failure: it was genuine, and a storefront tab left open
// past it keeps reading the catalog as anonymous.
type authGuard struct {
	authn    *auth.Authenticator
	failures *httprate.RateLimiter // nil: no limit
	limit    int
	window   time.Duration
}

// errTooManyFailures is authGuard.authenticate's refusal.
var errTooManyFailures = errors.New("too many failed authentications from this address; retry later")

func newAuthGuard(authn *auth.Authenticator, cfg RateLimits) *authGuard {
	g := &authGuard{authn: authn, limit: cfg.AuthFailures, window: cfg.Window}
	if cfg.AuthFailures > 0 {
		g.failures = httprate.NewRateLimiter(cfg.AuthFailures, cfg.Window)
	}
	return g
}

// spent reports whether the request's client address has no failed
// authentications left in this window.
func (g *authGuard) spent(ctx context.Context) bool {
	if g.failures == nil {
		return false
	}
	_, rate, err := g.failures.Status(ipKey(ctx))
	return err == nil && math.Round(rate) >= float64(g.limit)
}

// record counts actor's authentication against its client address if it
// failed.
func (g *authGuard) record(ctx context.Context, actor domain.Actor) {
	if g.failures == nil || !failedAuthentication(actor) {
		return
	}
	g.failures.OnLimit(headersOnly{http.Header{}}, (&http.Request{}).WithContext(ctx), ipKey(ctx))
}

// failedAuthentication says whether actor is what a token that did not
// authenticate resolves to (anonymous, with the reason), expiry aside.
func failedAuthentication(actor domain.Actor) bool {
	return actor.Role == domain.RoleAnonymous && actor.TokenProblem != "" && !strings.Contains(actor.TokenProblem, "expired")
}

// middleware is the authenticator's middleware behind the guard: a request
// with an Authorization header from an address whose failures are spent
// gets 429 (RATE_LIMITED, Retry-After: the window) without a lookup.
// Session cookies are not counted: the dashboard sends its cookie on every
// asset, and a cookie's signature is checked without the database.
func (g *authGuard) middleware(next http.Handler) http.Handler {
	counted := g.authn.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			g.record(r.Context(), domain.ActorFrom(r.Context()))
		}
		next.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" && g.spent(r.Context()) {
			g.refuse(w)
			return
		}
		counted.ServeHTTP(w, r)
	})
}

func (g *authGuard) refuse(w http.ResponseWriter) {
	retry := int(g.window / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(retry))
	writeErrorCode(w, http.StatusTooManyRequests, CodeRateLimited,
		"too many failed authentications from this address; retry after "+strconv.Itoa(retry)+" seconds")
}

// authenticate is Authenticate behind the guard, for a WebSocket's
// connection_init: errTooManyFailures when the address's failures are
// spent (the token is not looked up).
func (g *authGuard) authenticate(ctx context.Context, header string) (domain.Actor, error) {
	if g.spent(ctx) {
		return domain.Actor{}, errTooManyFailures
	}
	actor, err := g.authn.Authenticate(ctx, header)
	if err == nil {
		g.record(ctx, actor)
	}
	return actor, err
}

// signIns puts the dashboard's key-for-cookie exchange behind the guard: a
// sign-in is an authentication with the key in the body instead of the
// header, so a refused one (401) spends the address's failures, and while
// they are spent every sign-in from it is 429 before its key is looked up.
func (g *authGuard) signIns(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || g.failures == nil {
			next.ServeHTTP(w, r)
			return
		}
		if g.spent(r.Context()) {
			g.refuse(w)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			g.failures.OnLimit(headersOnly{http.Header{}}, r, ipKey(r.Context()))
		}
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
