package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func newTokens(t *testing.T) *CheckoutTokens {
	t.Helper()
	c, err := NewCheckoutTokens([]byte(strings.Repeat("s", MinSecretLength)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckoutTokensRoundTrip(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	ttl := 60
	token, expires, err := c.Issue("cart-42", &ttl)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(expires); d < 58*time.Second || d > 61*time.Second {
		t.Fatalf("expiresAt %v is not ~60s away", expires)
	}
	got, err := c.Verify(token)
	if err != nil || got != "cart-42" {
		t.Fatalf("Verify = %q, %v", got, err)
	}
}

func TestCheckoutTokensRejects(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	token, _, err := c.Issue("cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}

	other, err := NewCheckoutTokens([]byte(strings.Repeat("x", MinSecretLength)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Verify(token); err == nil {
		t.Fatal("a token signed with another secret was accepted")
	}

	expired := newTokens(t)
	expired.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	old, _, err := expired.Issue("cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(old); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}

	parts := strings.Split(token, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	if _, err := c.Verify(tampered); err == nil {
		t.Fatal("a tampered token was accepted")
	}

	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"cid": "cart-1", "sub": "cart-1", "iss": tokenIssuer, "aud": tokenAudience, "exp": time.Now().Add(time.Hour).Unix()})
	unsigned, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(unsigned); err == nil {
		t.Fatal("an alg=none token was accepted")
	}
}

func TestCheckoutTokensInput(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	for _, ttl := range []int{0, -1, 86401} {
		if _, _, err := c.Issue("cart-1", &ttl); err == nil {
			t.Errorf("ttl %d accepted", ttl)
		}
	}
	for _, id := range []string{"", strings.Repeat("c", 129), "new\nline"} {
		if _, _, err := c.Issue(id, nil); err == nil {
			t.Errorf("checkoutId %q accepted", id)
		}
	}
	if _, err := NewCheckoutTokens([]byte("short")); err == nil {
		t.Fatal("a short secret was accepted")
	}
}
