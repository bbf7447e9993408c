package auth

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"inventory/domain"
)

// KeyLookup finds a live API key by the hash of its secret. store.Store is one.
type KeyLookup interface {
	APIKeyGetBySecretHash(ctx context.Context, secretHash []byte) (*domain.APIKey, error)
}

// Authenticator resolves bearer tokens to actors.
type Authenticator struct {
	Keys     KeyLookup
	Checkout *CheckoutTokens
	// Sessions, if set, accepts the /admin dashboard's session cookie from
	// requests without an Authorization header.
	Sessions *Sessions
}

// Authenticate resolves an Authorization header value ("Bearer <token>") to an
// actor. An empty header is anonymous. A token that is not accepted is also
// anonymous, with TokenProblem saying why, so reading the catalog keeps working
// with a stale token while anything that needs the token says what is wrong.
// Only an infrastructure failure (database down) is an error.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (domain.Actor, error) {
	if header == "" {
		return domain.Anonymous, nil
	}
	// The scheme's name is case-insensitive (RFC 9110 §11.1): "bearer x"
	// is as good as "Bearer x". HTTP servers trim a header's trailing
	// spaces, so the "Bearer " that `-H "Authorization: Bearer $TOKEN"` sends
	// when $TOKEN is empty arrives as "Bearer": said apart from a malformed
	// header, it points at the empty variable instead of the header's shape.
	token, problem := bearerToken(header)
	if problem != "" {
		return rejected(problem), nil
	}
	if isAPISecret(token) {
		key, err := a.Keys.APIKeyGetBySecretHash(ctx, HashAPISecret(token))
		if err != nil {
			return domain.Actor{}, fmt.Errorf("auth: look up key: %w", err)
		}
		if key == nil {
			return rejected("unknown or revoked API key"), nil
		}
		return domain.Actor{Role: key.Role, Name: key.Name}, nil
	}
	checkoutID, err := a.Checkout.Verify(token)
	if err != nil {
		return rejected(err.Error()), nil
	}
	return domain.Actor{Role: domain.RoleCheckout, Name: "checkout:" + checkoutID, CheckoutID: checkoutID}, nil
}

// bearerToken is the token of a "Bearer <token>" header, or why there is none.
func bearerToken(header string) (token, problem string) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(header), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", "the Authorization header must be \"Bearer <token>\""
	}
	if token = strings.TrimSpace(token); token == "" {
		return "", EmptyBearerProblem
	}
	return token, ""
}

// KnownKeys tells a key this instance knows to be live from a guessed one
// without a database read per call. KeyCache is one.
type KnownKeys interface {
	KeyKnown(ctx context.Context, secretHash []byte) bool
}

// CheckableWithoutLookup says whether header carries a credential that can
// be checked without a lookup a guesser could drive: a checkout token (its
// signature is checked in memory) or an API key that Keys knows
// (KnownKeys). A malformed header and an unknown key cannot: an address
// that has spent its failed authentications is refused those before
// anything is looked up, and served the rest.
func (a *Authenticator) CheckableWithoutLookup(ctx context.Context, header string) bool {
	token, problem := bearerToken(header)
	if problem != "" {
		return false
	}
	if !isAPISecret(token) {
		return true
	}
	known, ok := a.Keys.(KnownKeys)
	return ok && known.KeyKnown(ctx, HashAPISecret(token))
}

// EmptyBearerProblem is why a bearer header with no token after it is not
// accepted. It fits a WebSocket close reason (at most 123 bytes), as every
// TokenProblem must.
const EmptyBearerProblem = `the bearer token is empty: "Bearer " must be followed by a token (is the variable holding it empty?)`

func rejected(problem string) domain.Actor {
	a := domain.Anonymous
	a.TokenProblem = problem
	return a
}

// Middleware records the request's actor in its context. It never rejects a
// request itself: the GraphQL layer answers with a GraphQL error, so clients see
// one error shape. When the key store cannot be reached it answers 503.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, err := a.authenticateRequest(r)
		if err != nil {
			http.Error(w, "authentication unavailable", http.StatusServiceUnavailable)
			return
		}
		ctx := domain.WithActor(r.Context(), actor)
		ctx = context.WithValue(ctx, recheckKey{}, Recheck(func(ctx context.Context) (domain.Actor, error) {
			return a.authenticateRequest(r.WithContext(ctx))
		}))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Recheck authenticates a long-lived request's credentials again: a
// WebSocket lives on after its key is revoked, its session ends or its
// checkout token expires, and must then be closed.
type Recheck func(ctx context.Context) (domain.Actor, error)

type recheckKey struct{}

// RecheckFrom returns how to authenticate the request that ctx belongs to
// again, from the same header or cookie; nil outside Middleware.
func RecheckFrom(ctx context.Context) Recheck {
	r, _ := ctx.Value(recheckKey{}).(Recheck)
	return r
}

// authenticateRequest is Authenticate for the Authorization header, else the
// session cookie where the request may use it (cookieMayAct); a cookie that
// may not act leaves the request anonymous, saying why (briefly: the reason
// also closes a WebSocket, whose close reason is at most 123 bytes).
func (a *Authenticator) authenticateRequest(r *http.Request) (domain.Actor, error) {
	header := r.Header.Get("Authorization")
	if header != "" || a.Sessions == nil {
		return a.Authenticate(r.Context(), header)
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return domain.Anonymous, nil
	}
	if !cookieMayAct(r) {
		return rejected("admin session cookie refused: not the dashboard's own request (needs the " + CSRFHeader + " header)"), nil
	}
	return a.Sessions.Actor(r.Context(), c.Value)
}
