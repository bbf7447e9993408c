package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
// checkout tokens — is refused before its next unknown token is even looked
// up, so guessing costs neither database reads nor CPU beyond the budget.
//
// The budget bounds lookups of unknown credentials, never valid ones: behind
// a load balancer that is not a trusted proxy every client is one address,
// and a guesser must not lock the checkout backend out. While an address's
// budget is spent, a request from it is still served when its credential
// can be checked without a lookup the guesser could drive
// (auth.Authenticator.CheckableWithoutLookup: a checkout token, whose
// signature is checked in memory, or an API key the instance knows to be
// live) and turns out valid; a malformed header or an unknown key is 429
// before anything is looked up, and a token that fails its check is 429
// after it. Requests without a token go on as anonymous callers with their
// own budgets. An expired checkout token is not a failure: it was genuine,
// and a storefront tab left open past it keeps reading the catalog as
// anonymous.
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
// from an address whose failures are spent, with an Authorization header
// that is malformed or an unknown key, gets 429 (RATE_LIMITED, Retry-After:
// the window) without a lookup; one whose token fails its check gets 429
// after it; a valid one is served.
// Session cookies are not counted: the dashboard sends its cookie on every
// asset, and a cookie's signature is checked without the database.
func (g *authGuard) middleware(next http.Handler) http.Handler {
	counted := g.authn.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			actor := domain.ActorFrom(r.Context())
			g.record(r.Context(), actor)
			if spentAddress(r.Context()) && failedAuthentication(actor) {
				g.refuse(w)
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if header := r.Header.Get("Authorization"); header != "" && g.spent(r.Context()) {
			if !g.authn.CheckableWithoutLookup(r.Context(), header) {
				g.refuse(w)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), spentAddressKey{}, true))
		}
		counted.ServeHTTP(w, r)
	})
}

type spentAddressKey struct{}

// spentAddress says whether the request came from an address whose failed
// authentications were spent when it arrived.
func spentAddress(ctx context.Context) bool {
	spent, _ := ctx.Value(spentAddressKey{}).(bool)
	return spent
}

func (g *authGuard) refuse(w http.ResponseWriter) {
	retry := int(g.window / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(retry))
	writeErrorCode(w, http.StatusTooManyRequests, CodeRateLimited,
		"too many failed authentications from this address; retry after "+strconv.Itoa(retry)+" seconds")
}

// authenticate is Authenticate behind the guard, for a WebSocket's
// connection_init: errTooManyFailures when the address's failures are
// spent and the token is not a valid one checked without a lookup
// (unknown keys are not looked up).
func (g *authGuard) authenticate(ctx context.Context, header string) (domain.Actor, error) {
	spent := header != "" && g.spent(ctx)
	if spent && !g.authn.CheckableWithoutLookup(ctx, header) {
		return domain.Actor{}, errTooManyFailures
	}
	actor, err := g.authn.Authenticate(ctx, header)
	if err != nil {
		return actor, err
	}
	g.record(ctx, actor)
	if spent && failedAuthentication(actor) {
		return domain.Actor{}, errTooManyFailures
	}
	return actor, nil
}

// signIns puts the dashboard's key-for-cookie exchange behind the guard: a
// sign-in is an authentication with the key in the body instead of the
// header, so a refused one (401) spends the address's failures, and while
// they are spent a sign-in from it is 429 before its key is looked up
// unless the key is one the instance knows to be live (as for a bearer key).
func (g *authGuard) signIns(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || g.failures == nil {
			next.ServeHTTP(w, r)
			return
		}
		if g.spent(r.Context()) {
			// The handler reads at most 4 KB of {"key": …}; so does this.
			body, _ := io.ReadAll(io.LimitReader(r.Body, signInBodyBytes))
			var in struct {
				Key string `json:"key"`
			}
			if json.Unmarshal(body, &in) != nil || !g.authn.CheckableWithoutLookup(r.Context(), "Bearer "+in.Key) {
				g.refuse(w)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			g.failures.OnLimit(headersOnly{http.Header{}}, r, ipKey(r.Context()))
		}
	})
}

// signInBodyBytes is as much of a sign-in's body as the guard reads.
const signInBodyBytes = 4096

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
