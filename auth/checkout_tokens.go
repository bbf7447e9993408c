package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"

	"inventory/domain"
)

// MinSecretLength is the shortest INVENTORY_TOKEN_SECRET accepted: HS256 wants
// at least as many key bytes as its output.
const MinSecretLength = 32

const (
	tokenIssuer   = "inventory"
	tokenAudience = "checkout"
)

// CheckoutTokens issues and verifies checkout tokens: HS256 JWTs bound to one
// checkoutId, short-lived, and verifiable by every instance that shares the
// secrets without a database round trip. Tokens name their key ("kid" in
// the JWS header) so the secret can rotate: sign with the first, verify
// with any listed (ParseTokenSecrets).
type CheckoutTokens struct {
	// MaxTTL is the longest lifetime Issue grants, in seconds: how long a
	// leaked token stays useful. Zero means domain.MaxCheckoutTokenTTL.
	MaxTTL int
	keys   []tokenKey // keys[0] signs
	now    func() time.Time
	// verified remembers tokens that verified, until they expire: a
	// checkout sends the same token with every request, and parsing and
	// checking it (JSON, claims, HMAC) was 5 % of the server's CPU at
	// 2,600 reserves/s. Only a token that verified is kept, so a caller
	// cannot fill it with guesses; a token signed with a secret the ring no
	// longer lists is gone with the process that listed it.
	verified *lru.Cache[string, verifiedToken]
}

// verifiedToken is what a token verified to, and until when.
type verifiedToken struct {
	checkoutID string
	expires    time.Time
}

// VerifiedTokenEntries bounds the verified-token cache: about 1.2 KB an
// entry with a long checkout id (the token twice, the id, the LRU's
// bookkeeping), about 20 MB at most.
const VerifiedTokenEntries = 16_384

// NewCheckoutTokens returns an issuer/verifier for a key ring of secrets:
// the first signs, every one verifies.
func NewCheckoutTokens(secrets ...[]byte) (*CheckoutTokens, error) {
	keys, err := keyRing(secrets)
	if err != nil {
		return nil, err
	}
	verified, err := lru.New[string, verifiedToken](VerifiedTokenEntries)
	if err != nil {
		return nil, fmt.Errorf("auth: verified-token cache: %w", err)
	}
	return &CheckoutTokens{keys: keys, now: time.Now, verified: verified}, nil
}

type checkoutClaims struct {
	jwt.RegisteredClaims
	CheckoutID string `json:"cid"`
}

// Issue mints a token for checkoutID valid for ttlSeconds (default
// domain.DefaultCheckoutTTL when nil).
func (c *CheckoutTokens) Issue(checkoutID string, ttlSeconds *int) (string, time.Time, error) {
	if err := domain.CheckIdentifier([]string{"checkoutId"}, checkoutID); err != nil {
		return "", time.Time{}, err
	}
	ttl := domain.DefaultCheckoutTTL
	if ttlSeconds != nil {
		ttl = *ttlSeconds
	}
	if ttl < 1 || ttl > domain.MaxCheckoutTokenTTL {
		return "", time.Time{}, domain.InvalidInput([]string{"ttlSeconds"}, "ttlSeconds must be between 1 and %d", domain.MaxCheckoutTokenTTL)
	}
	if c.MaxTTL > 0 && ttl > c.MaxTTL {
		return "", time.Time{}, &domain.Error{Code: domain.CodeLimitExceeded, Field: []string{"ttlSeconds"},
			Message: fmt.Sprintf("a checkout token lives at most %d seconds (INVENTORY_CHECKOUT_TOKEN_MAX_TTL), got %d", c.MaxTTL, ttl)}
	}
	now := c.now()
	expires := now.Add(time.Duration(ttl) * time.Second).Truncate(time.Second)
	claims := checkoutClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    tokenIssuer,
			Audience:  jwt.ClaimStrings{tokenAudience},
			Subject:   checkoutID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(expires),
		},
		CheckoutID: checkoutID,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	t.Header["kid"] = c.keys[0].id
	token, err := t.SignedString(c.keys[0].secret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: sign checkout token: %w", err)
	}
	return token, expires, nil
}

// errOtherKey: the token's kid names another key of the ring.
var errOtherKey = errors.New("signed with another key")

// Verify returns the checkoutId a valid token is bound to. It accepts each
// token in one spelling only, the one Issue wrote: only base64url characters
// and dots (base64 decoding would skip an inserted "\r" or "\n"), and a
// signature in canonical unpadded base64url (its last character's unused
// bits zero), so that no other string verifies as an issued token.
func (c *CheckoutTokens) Verify(token string) (string, error) {
	if v, ok := c.verified.Get(token); ok && c.now().Before(v.expires) {
		return v.checkoutID, nil
	}
	if !canonicalToken(token) {
		return "", errors.New("checkout token invalid")
	}
	var claims checkoutClaims
	var err error
	for _, key := range c.keys {
		claims = checkoutClaims{}
		var kidKnown bool
		_, err = jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
			// A token names its key; one minted before key ids (no kid)
			// is tried against each key in turn (the ring is at most
			// MaxTokenSecrets long). A kid naming another key is skipped
			// without computing an HMAC.
			kid, present := t.Header["kid"]
			if present && kid != key.id {
				return nil, errOtherKey
			}
			kidKnown = present
			return key.secret, nil
		},
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithIssuer(tokenIssuer), jwt.WithAudience(tokenAudience),
			jwt.WithExpirationRequired(), jwt.WithTimeFunc(c.now))
		if !errors.Is(err, errOtherKey) && (err == nil || kidKnown || !errors.Is(err, jwt.ErrTokenSignatureInvalid)) {
			break
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "", errors.New("checkout token expired")
	case err != nil:
		return "", errors.New("checkout token invalid")
	case claims.CheckoutID == "" || claims.CheckoutID != claims.Subject:
		return "", errors.New("checkout token names no checkout")
	}
	c.verified.Add(token, verifiedToken{checkoutID: claims.CheckoutID, expires: claims.ExpiresAt.Time})
	return claims.CheckoutID, nil
}

// canonicalToken reports whether token has only the characters of a compact
// JWS ([A-Za-z0-9_-] and dots) and a last segment, the signature, that is the
// canonical unpadded base64url encoding of what it decodes to. The header and
// payload need no such check: the signature covers their literal text.
func canonicalToken(token string) bool {
	for i := 0; i < len(token); i++ {
		switch b := token[i]; {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	seg := token[strings.LastIndexByte(token, '.')+1:]
	sig, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	return err == nil && base64.RawURLEncoding.EncodeToString(sig) == seg
}
