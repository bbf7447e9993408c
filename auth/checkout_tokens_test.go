package auth

import (
	"fmt"
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

// issueFor issues a token for checkoutID living ttl seconds.
func issueFor(t *testing.T, c *CheckoutTokens, checkoutID string, ttl int) (string, time.Time) {
	t.Helper()
	token, expires, err := c.Issue(checkoutID, &ttl)
	if err != nil {
		t.Fatal(err)
	}
	return token, expires
}

func TestCheckoutTokensRoundTrip(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	token, expires := issueFor(t, c, "cart-42", 60)
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

// TestCheckoutTokensOneSpelling: a token verifies only as Issue wrote it.
// Base64 decoding skips "\r" and "\n" and ignores the two unused bits of a
// 43-character signature's last character; Verify refuses those spellings,
// and padding or any other character, with the message of a malformed token.
func TestCheckoutTokensOneSpelling(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	token, _, err := c.Issue("cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := c.Verify(token); err != nil || id != "cart-1" {
		t.Fatalf("Verify(Issue) = %q, %v", id, err)
	}
	dot := strings.LastIndexByte(token, '.')
	sig := token[dot+1:]
	if len(sig) != 43 {
		t.Fatalf("an HS256 signature is 43 characters of base64url, got %q", sig)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[42])
	if last < 0 || last&3 != 0 {
		t.Fatalf("the signature's last character %q has unused bits set", sig[42])
	}

	variants := map[string]string{
		"trailing LF":          token + "\n",
		"trailing CRLF":        token + "\r\n",
		"trailing CR":          token + "\r",
		"LF in the signature":  token[:dot+20] + "\n" + token[dot+20:],
		"CR in the signature":  token[:dot+1] + "\r" + token[dot+1:],
		"CRLFs everywhere":     token[:dot+10] + "\r\n" + token[dot+10:dot+30] + "\n\r" + token[dot+30:],
		"padded":               token + "=",
		"leading space":        " " + token,
		"trailing space":       token + " ",
		"tab in the signature": token[:dot+5] + "\t" + token[dot+5:],
		"NUL at the end":       token + "\x00",
		"standard base64 +":    token[:dot+1] + "+" + sig[1:],
		"standard base64 /":    token[:dot+1] + sig[:42] + "/",
		"LF in the payload":    token[:dot-5] + "\n" + token[dot-5:],
	}
	for bits := 1; bits <= 3; bits++ {
		variants[fmt.Sprintf("unused bits %02b", bits)] = token[:len(token)-1] + string(alphabet[last|bits])
	}
	for name, v := range variants {
		if v == token {
			t.Fatalf("%s: not a different spelling", name)
		}
		if id, err := c.Verify(v); err == nil || err.Error() != "checkout token invalid" {
			t.Errorf("%s: Verify(%q) = %q, %v; want the error checkout token invalid", name, v, id, err)
		}
	}
}

// TestCheckoutTokensKeyRing: the first secret signs (its kid in the
// header); a token verifies under any ring that lists its secret, including
// one minted before tokens carried a kid, and under no ring that does not.
func TestCheckoutTokensKeyRing(t *testing.T) {
	t.Parallel()
	a, b := []byte(strings.Repeat("a", MinSecretLength)), []byte(strings.Repeat("b", MinSecretLength))
	onlyA, _ := NewCheckoutTokens(a)
	rotating, _ := NewCheckoutTokens(b, a)
	onlyB, _ := NewCheckoutTokens(b)
	tokA, _, err := onlyA.Issue("cart-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A token as the previous version minted it: no kid.
	legacy, err := jwt.NewWithClaims(jwt.SigningMethodHS256, checkoutClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: tokenIssuer, Audience: jwt.ClaimStrings{tokenAudience}, Subject: "cart-1",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))},
		CheckoutID: "cart-1"}).SignedString(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokA, legacy} {
		if _, err := rotating.Verify(tok); err != nil {
			t.Fatalf("B,A refused A's token: %v", err)
		}
		if _, err := onlyB.Verify(tok); err == nil {
			t.Fatal("B accepted A's token")
		}
	}
	tokB, _, _ := rotating.Issue("cart-1", nil)
	if _, err := onlyB.Verify(tokB); err != nil {
		t.Fatalf("the B,A ring did not sign with B: %v", err)
	}
	if _, err := onlyA.Verify(tokB); err == nil {
		t.Fatal("A accepted B's token")
	}
	// A kid naming a key of the ring does not let another key's signature pass.
	parts := strings.Split(tokB, ".")
	aParts := strings.Split(tokA, ".")
	if _, err := rotating.Verify(aParts[0] + "." + parts[1] + "." + parts[2]); err == nil {
		t.Fatal("B's signature verified under A's kid")
	}
	for _, bad := range []string{"", " ", strings.Repeat("a", 32) + ",short", string(a) + "," + string(a), strings.Repeat(string(a)+",", MaxTokenSecrets) + string(a)} {
		if _, err := ParseTokenSecrets(bad); err == nil {
			t.Errorf("INVENTORY_TOKEN_SECRET %.40q accepted", bad)
		}
	}
	if s, err := ParseTokenSecrets(" " + string(b) + " , " + string(a)); err != nil || len(s) != 2 || string(s[0]) != string(b) {
		t.Fatalf("ring B,A: %q %v", s, err)
	}
}

// TestVerifiedTokenCacheKeepsExpiry: a token verified once is answered from
// the cache, but no longer than it lives: past its exp it is expired as if
// it had never been seen, and a token that failed is not remembered.
func TestVerifiedTokenCacheKeepsExpiry(t *testing.T) {
	t.Parallel()
	c := newTokens(t)
	token, _ := issueFor(t, c, "cart-7", 60)
	for range 3 {
		if got, err := c.Verify(token); err != nil || got != "cart-7" {
			t.Fatalf("Verify = %q, %v", got, err)
		}
	}
	if _, ok := c.verified.Get(token); !ok {
		t.Fatal("a verified token is not in the cache")
	}
	c.now = func() time.Time { return time.Now().Add(61 * time.Second) }
	if _, err := c.Verify(token); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a cached token past its expiry: %v, want expired", err)
	}
	parts := strings.Split(token, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	if _, err := c.Verify(tampered); err == nil {
		t.Fatal("a tampered token was accepted")
	}
	if _, ok := c.verified.Get(tampered); ok || c.verified.Len() != 1 {
		t.Fatalf("a token that failed was cached (%d entries)", c.verified.Len())
	}
}
