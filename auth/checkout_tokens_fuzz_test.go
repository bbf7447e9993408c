package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"inventory/domain"
)

// The fuzz targets run on a fixed clock, so that the tokens they issue (and
// the seed corpus holds) are the same bytes on every run and never expire.
var (
	fuzzNow         = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fuzzSecret      = []byte("fuzz-secret-fuzz-secret-fuzz-secret!")
	fuzzOtherSecret = []byte("another-secret-another-secret-another")
	verifyErrors    = map[string]bool{"checkout token expired": true, "checkout token invalid": true, "checkout token names no checkout": true}
)

func fuzzTokens(t testing.TB, secret []byte, now time.Time) *CheckoutTokens {
	t.Helper()
	c, err := NewCheckoutTokens(secret)
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	return c
}

// signedToken is the one spelling of a token over input (header.payload)
// that the secret's holder writes: input, a dot, and the HMAC-SHA256 of input
// in unpadded base64url. Nobody without the secret can write it, and no
// other string is that token.
func signedToken(secret []byte, input string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// isBase64URLSegment: only the characters of unpadded base64url.
func isBase64URLSegment(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; !('A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// requireVerifiedIsGenuine checks a token Verify accepted against the
// contract restated: three segments of base64url characters; the token is
// byte for byte the secret's signature of its first two segments, so it was
// issued with this secret (nobody else can make one) and spelled as issued
// (no newline, padding or other bits in the signature); the header names
// HS256; the claims name this issuer and audience, expire after now, and
// carry the returned id as both cid and sub. Another secret's verifier
// refuses it.
func requireVerifiedIsGenuine(t *testing.T, token, id string, other *CheckoutTokens) {
	t.Helper()
	segments := strings.Split(token, ".")
	if len(segments) != 3 {
		t.Fatalf("Verify accepted %q, which is not header.payload.signature", token)
	}
	for _, seg := range segments {
		if !isBase64URLSegment(seg) {
			t.Fatalf("Verify accepted %q, which has a character outside base64url in %q", token, seg)
		}
	}
	headerSeg, payloadSeg := segments[0], segments[1]
	if want := signedToken(fuzzSecret, headerSeg+"."+payloadSeg); token != want {
		t.Fatalf("Verify accepted %q, which is not the secret's token %q", token, want)
	}
	var header struct{ Alg string }
	var claims struct {
		Iss, Sub, Cid string
		Aud           any
		Exp           float64
	}
	if h, err := base64.RawURLEncoding.DecodeString(headerSeg); err != nil || json.Unmarshal(h, &header) != nil || header.Alg != "HS256" {
		t.Fatalf("Verify accepted %q, whose header is not HS256", token)
	}
	if p, err := base64.RawURLEncoding.DecodeString(payloadSeg); err != nil || json.Unmarshal(p, &claims) != nil {
		t.Fatalf("Verify accepted %q, whose payload is not JSON claims", token)
	}
	aud := fmt.Sprint(claims.Aud)
	if claims.Iss != tokenIssuer || (aud != tokenAudience && aud != "["+tokenAudience+"]") ||
		claims.Exp <= float64(fuzzNow.Unix()) || claims.Cid == "" || claims.Cid != claims.Sub || id != claims.Cid {
		t.Fatalf("Verify(%q) = %q for the claims %+v", token, id, claims)
	}
	if got, err := other.Verify(token); err == nil {
		t.Fatalf("another secret's verifier accepted %q as %q", token, got)
	}
}

func requireVerifyError(t *testing.T, token string, err error) {
	t.Helper()
	if !verifyErrors[err.Error()] {
		t.Fatalf("Verify(%q): unexpected error %q (errors must be one of the fixed messages)", token, err)
	}
}

// fuzzSeedTokens is what both targets start from: tokens Issue made, and
// tokens crafted with the same secret that Verify must refuse (alg none, the
// wrong HMAC, no expiry, wrong issuer or audience, cid ≠ sub, expired).
func fuzzSeedTokens(f *testing.F) (seeds []string) {
	c := fuzzTokens(f, fuzzSecret, fuzzNow)
	for _, id := range []string{"cart-42", "c", "日本", strings.Repeat("x", domain.MaxIdentifierLength), "a.b", "a b"} {
		token, _, err := c.Issue(id, nil)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, token, token+"\n", token[:len(token)-1], strings.ToUpper(token))
		seeds = append(seeds, respellings(token)...)
	}
	craft := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) {
		token, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, token)
	}
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": tokenIssuer, "aud": []string{tokenAudience}, "sub": "cart-1", "cid": "cart-1",
			"iat": fuzzNow.Unix(), "exp": fuzzNow.Add(time.Hour).Unix()}
	}
	with := func(k string, v any) jwt.MapClaims {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	craft(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good())
	craft(jwt.SigningMethodHS384, fuzzSecret, good())
	craft(jwt.SigningMethodHS512, fuzzSecret, good())
	craft(jwt.SigningMethodHS256, fuzzOtherSecret, good())
	craft(jwt.SigningMethodHS256, fuzzSecret, with("exp", nil))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("exp", fuzzNow.Add(-time.Second).Unix()))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("iss", "someone-else"))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("aud", "admin"))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("cid", "cart-2"))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("cid", nil))
	craft(jwt.SigningMethodHS256, fuzzSecret, with("nbf", fuzzNow.Add(time.Hour).Unix()))
	seeds = append(seeds, "", ".", "..", "a.b.c", "eyJhbGciOiJIUzI1NiJ9..", "Bearer x", "\x00", "\xff.\xfe.\xfd",
		strings.Repeat("A", 4096)+"."+strings.Repeat("B", 4096)+"."+strings.Repeat("C", 43))
	return seeds
}

// wellSpelled: token has only base64url characters and dots, and its last
// segment is canonical unpadded base64url: not one character past a whole
// group, and a final partial group's unused low bits (4 of the last character
// after 2, 2 after 3) zero.
func wellSpelled(token string) bool {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, seg := range strings.Split(token, ".") {
		if !isBase64URLSegment(seg) {
			return false
		}
	}
	sig := token[strings.LastIndexByte(token, '.')+1:]
	if sig == "" {
		return true
	}
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	switch len(sig) % 4 {
	case 1:
		return false
	case 2:
		return last&0xf == 0
	case 3:
		return last&0x3 == 0
	}
	return true
}

// respellings are strings that base64 decoding reads as token's bytes: "\r"
// and "\n" in and after the signature, padding, and the signature's last
// character with its two unused bits set. Verify refuses them all.
func respellings(token string) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	dot := strings.LastIndexByte(token, '.')
	mid := dot + (len(token)-dot)/2
	last := strings.IndexByte(alphabet, token[len(token)-1])
	return []string{
		token + "\r\n", token + "\r", token + "=",
		token[:mid] + "\n" + token[mid:], token[:mid] + "\r\n" + token[mid:], token[:dot+1] + "\n" + token[dot+1:],
		token[:len(token)-1] + string(alphabet[last|1]), token[:len(token)-1] + string(alphabet[last|2]),
		token[:len(token)-1] + string(alphabet[last|3]),
	}
}

// FuzzCheckoutTokenVerify: Verify never panics on any string; it accepts only
// a token that is byte for byte one its secret signed (HS256 over the literal
// header and payload, the signature in canonical base64url: so issued by it,
// and spelled as issued), unexpired, for its issuer and audience, returning
// the checkoutId the token carries as cid and sub; another secret never
// accepts it; every refusal is one of three fixed messages, which quote
// nothing of the token.
func FuzzCheckoutTokenVerify(f *testing.F) {
	seeds := fuzzSeedTokens(f)
	for _, s := range seeds {
		f.Add(s)
	}
	c := fuzzTokens(f, fuzzSecret, fuzzNow)
	other := fuzzTokens(f, fuzzOtherSecret, fuzzNow)
	f.Fuzz(func(t *testing.T, token string) {
		id, err := c.Verify(token)
		if !wellSpelled(token) && (err == nil || err.Error() != "checkout token invalid") {
			t.Fatalf("Verify(%q) = %q, %v; want checkout token invalid, before anything else", token, id, err)
		}
		if err != nil {
			if id != "" {
				t.Fatalf("Verify(%q) returned %q with the error %v", token, id, err)
			}
			requireVerifyError(t, token, err)
			return
		}
		requireVerifiedIsGenuine(t, token, id, other)
	})
}

// FuzzCheckoutTokenIssueVerify: Issue refuses (INVALID_INPUT) exactly a
// checkoutId that is not an identifier or a ttlSeconds outside
// 1..MaxCheckoutTokenTTL; what it issues verifies as that checkoutId until
// its expiry and not after, is refused by another secret, and is refused,
// with one of the fixed messages, after any one-byte change (flip != 0: the
// byte at pos xor flip), one-byte insertion (flip before the byte at pos, or
// at the end) or one-byte deletion (at pos): a token verifies only as the
// exact bytes it was issued as.
func FuzzCheckoutTokenIssueVerify(f *testing.F) {
	f.Add("cart-42", 60, uint16(0), byte(1))
	f.Add("cart-42", domain.DefaultCheckoutTTL, uint16(10), byte(0x20))
	f.Add("cart-42", domain.MaxCheckoutTokenTTL, uint16(math.MaxUint16), byte(0x01))
	f.Add("cart-42", domain.MaxCheckoutTokenTTL+1, uint16(0), byte(0))
	f.Add("cart-42", 0, uint16(0), byte(0))
	f.Add("cart-42", -1, uint16(0), byte(0))
	f.Add("cart-42", math.MaxInt, uint16(0), byte(0))
	f.Add("", 60, uint16(0), byte(0))
	f.Add(strings.Repeat("x", domain.MaxIdentifierLength+1), 60, uint16(0), byte(0))
	f.Add("\"},\"cid\":\"evil", 60, uint16(3), byte(0x40))
	f.Add("cart\x00-1", 60, uint16(0), byte(0))
	f.Add("\xff", 60, uint16(0), byte(0))
	f.Add("日本語のカート", 1, uint16(200), byte(0x80))
	f.Add("a.b.c", 60, uint16(1), byte(0x03))
	// The respellings base64 decoding forgives, at the signature's last
	// character (its two unused bits) and in and after the signature.
	c := fuzzTokens(f, fuzzSecret, fuzzNow)
	for _, ttl := range []int{60, domain.DefaultCheckoutTTL} {
		token, _, err := c.Issue("cart-42", &ttl)
		if err != nil {
			f.Fatal(err)
		}
		last, sig := uint16(len(token)-1), uint16(strings.LastIndexByte(token, '.')+1)
		for _, v := range respellings(token)[6:] { // the unused bits set
			f.Add("cart-42", ttl, last, token[last]^v[last])
		}
		f.Add("cart-42", ttl, uint16(len(token)), byte('\n'))
		f.Add("cart-42", ttl, last, byte('\r'))
		f.Add("cart-42", ttl, sig, byte('\n'))
		f.Add("cart-42", ttl, sig+20, byte('='))
	}

	other := fuzzTokens(f, fuzzOtherSecret, fuzzNow)
	f.Fuzz(func(t *testing.T, checkoutID string, ttl int, pos uint16, flip byte) {
		token, expires, err := c.Issue(checkoutID, &ttl)
		if domain.CheckIdentifier(nil, checkoutID) != nil || ttl < 1 || ttl > domain.MaxCheckoutTokenTTL {
			e, ok := domain.AsError(err)
			if !ok || e.Code != domain.CodeInvalidInput || token != "" {
				t.Fatalf("Issue(%q, %d) = %q, %v; want INVALID_INPUT", checkoutID, ttl, token, err)
			}
			if len(checkoutID) > domain.MaxIdentifierLength && strings.Contains(e.Message, checkoutID) {
				t.Fatalf("Issue's error %q quotes the checkoutId", e.Message)
			}
			return
		}
		if err != nil {
			t.Fatalf("Issue(%q, %d): %v", checkoutID, ttl, err)
		}
		if want := fuzzNow.Add(time.Duration(ttl) * time.Second); !expires.Equal(want) {
			t.Fatalf("expires %v, want %v", expires, want)
		}
		if id, err := c.Verify(token); err != nil || id != checkoutID {
			t.Fatalf("Verify(Issue(%q)) = %q, %v", checkoutID, id, err)
		}
		if id, err := other.Verify(token); err == nil {
			t.Fatalf("another secret's verifier accepted the token as %q", id)
		}
		if foreign, _, err := other.Issue(checkoutID, &ttl); err != nil {
			t.Fatal(err)
		} else if got, err := c.Verify(foreign); err == nil {
			t.Fatalf("a token of another secret verified as %q", got)
		}
		if id, err := fuzzTokens(t, fuzzSecret, expires.Add(-time.Second)).Verify(token); err != nil || id != checkoutID {
			t.Fatalf("a second before expiry: %q, %v", id, err)
		}
		if _, err := fuzzTokens(t, fuzzSecret, expires.Add(time.Second)).Verify(token); err == nil || err.Error() != "checkout token expired" {
			t.Fatalf("a second after expiry: %v", err)
		}

		i := int(pos) % len(token)
		var mutations []string
		if flip != 0 {
			flipped := []byte(token)
			flipped[i] ^= flip
			mutations = append(mutations, string(flipped))
		}
		at := int(pos) % (len(token) + 1)
		mutations = append(mutations, token[:at]+string([]byte{flip})+token[at:], token[:i]+token[i+1:])
		for _, m := range mutations {
			if m == token {
				t.Fatalf("mutation of %q at %d with %#x left it as it was", token, pos, flip)
			}
			id, err := c.Verify(m)
			if err == nil {
				t.Fatalf("%q, a one-byte change (at %d, %#x) of the issued %q, verified as %q", m, pos, flip, token, id)
			}
			if id != "" {
				t.Fatalf("Verify(%q) returned %q with the error %v", m, id, err)
			}
			requireVerifyError(t, m, err)
		}
	})
}
