package webhooks

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Verify accepts only the exact header value signing produces: base64 with
// other trailing bits, or a timestamp written another way ("+…", "0…"),
// decodes or parses to the same values but was never signed.
func TestVerifyAcceptsOnlyWhatSigningProduces(t *testing.T) {
	t.Parallel()
	now := time.Unix(specTS, 0)
	// specSig ends "E=": the last character carries 2 unused bits, so "F",
	// "G" and "H" decode to the same 32 bytes.
	for _, sig := range []string{"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OH=",
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=="} {
		if err := Verify(specSecret, specID, "1614265330", []byte(specBody), sig, now, DefaultTolerance); !errors.Is(err, ErrNoMatch) {
			t.Errorf("Verify(%s) = %v, want ErrNoMatch", sig, err)
		}
	}
	for _, ts := range []string{"+1614265330", "01614265330", " 1614265330", "1614265330 ", "1_614_265_330"} {
		if err := Verify(specSecret, specID, ts, []byte(specBody), specSig, now, DefaultTolerance); err == nil {
			t.Errorf("Verify with timestamp %q accepted", ts)
		}
	}
}

// FuzzVerify: Verify never panics, whatever the secret, id, timestamp, body,
// header, clock and tolerance; it accepts what Sign produced for the same
// id, timestamp and body; and it accepts a header exactly when one of its
// space-separated parts is that signature, character for character.
func FuzzVerify(f *testing.F) {
	specKey, _ := key(specSecret)
	f.Add(specKey, specID, int64(specTS), []byte(specBody), specSig, int64(0), int64(300))
	// The spec's signature with other unused trailing bits: accepted before
	// Verify compared base64 text instead of decoded bytes.
	f.Add(specKey, specID, int64(specTS), []byte(specBody), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF=", int64(0), int64(300))
	f.Add([]byte{1}, "", int64(0), []byte{}, "", int64(0), int64(0))
	f.Add([]byte("k"), "evt_5.stock.low", int64(-1), []byte("{}"), "v1,x v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OF= v2,y", int64(1<<62), int64(-5))
	f.Add([]byte("key"), "msg", int64(1<<62), []byte("\x00\xff"), "v1, v1,,, \t\nv1,AAAA", int64(-1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, k []byte, id string, ts int64, body []byte, header string, skew, tolerance int64) {
		secret := SecretPrefix + base64.StdEncoding.EncodeToString(k)
		now := time.Unix(ts, 0).Add(time.Duration(skew))
		tol := time.Duration(tolerance)
		// Never panics on anything, even a malformed secret or timestamp.
		_ = Verify(header, id, header, body, header, now, tol)
		_ = Verify(SecretPrefix+header, id, strconv.FormatInt(ts, 10), body, header, now, tol)
		if len(k) == 0 {
			if err := Verify(secret, id, strconv.FormatInt(ts, 10), body, header, now, tol); !errors.Is(err, ErrBadSecret) {
				t.Fatalf("empty key: %v", err)
			}
			return
		}
		sig := Sign(secret, id, ts, body)
		stamp := strconv.FormatInt(ts, 10)
		// Within tolerance (or none): a signed header verifies, alone or
		// among others, and an arbitrary one exactly when it holds sig.
		if err := Verify(secret, id, stamp, body, sig, time.Unix(ts, 0), tol); err != nil {
			t.Fatalf("Verify(Sign) = %v", err)
		}
		if err := Verify(secret, id, stamp, body, header+" "+sig+" "+header, time.Unix(ts, 0), 0); err != nil {
			t.Fatalf("Verify(%q + Sign) = %v", header, err)
		}
		err := Verify(secret, id, stamp, body, header, now, 0)
		if want := slices.Contains(strings.Fields(header), sig); (err == nil) != want {
			t.Fatalf("Verify(%q) = %v; the header holds the signature %s: %v", header, err, sig, want)
		}
		// With a tolerance, a clock further off than it is refused.
		if tol > 0 {
			err := Verify(secret, id, stamp, body, sig, now, tol)
			off := now.Sub(time.Unix(ts, 0))
			if tooFar := off > tol || off < -tol; tooFar != errors.Is(err, ErrTimestamp) || (!tooFar && err != nil) {
				t.Fatalf("clock %v off, tolerance %v: %v", off, tol, err)
			}
		}
	})
}
