package codecrypt

import (
	"bytes"
	"strings"
	"testing"
)

func TestSealOpenAndRotation(t *testing.T) {
	t.Parallel()
	k1, k2, h := NewKey(), NewKey(), NewKey()
	old, err := ParseKeyring("k1:"+k1, h)
	if err != nil {
		t.Fatal(err)
	}
	sealed, id := old.Seal(7, "GIFT-1234")
	if id != "k1" || bytes.Contains(sealed, []byte("GIFT")) {
		t.Fatalf("sealed %q with %s", sealed, id)
	}
	// Rotated: k2 encrypts new codes, k1 still opens old ones.
	rotated, err := ParseKeyring("k2:"+k2+",k1:"+k1, h)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(7, "k1", sealed); err != nil || got != "GIFT-1234" {
		t.Fatalf("rotated ring opens old code: %q %v", got, err)
	}
	if _, id := rotated.Seal(7, "X"); id != "k2" {
		t.Fatalf("new codes sealed with %s", id)
	}
	if !bytes.Equal(old.Fingerprint("gift 1234"), rotated.Fingerprint("GIFT-1234")) {
		t.Fatal("fingerprint changed with rotation or normalization")
	}
	// Wrong key, missing key, other SKU, tampering: errors, never garbage.
	wrong, _ := ParseKeyring("k1:"+NewKey(), h)
	if _, err := wrong.Open(7, "k1", sealed); err == nil {
		t.Fatal("a wrong key opened the code")
	}
	if _, err := wrong.Open(7, "k9", sealed); err == nil {
		t.Fatal("an unknown key id opened the code")
	}
	if _, err := old.Open(8, "k1", sealed); err == nil {
		t.Fatal("a code opened under another SKU")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := old.Open(7, "k1", sealed); err == nil {
		t.Fatal("a tampered code opened")
	}
}

func TestParseKeyringRejects(t *testing.T) {
	t.Parallel()
	good := NewKey()
	for _, c := range []struct{ keys, hmac string }{
		{"", good},
		{"k1", good},
		{"k1:short", good},
		{"k1:" + good + ",k1:" + good, good},
		{"k1:" + good, ""},
		{"k1:" + good, "bm90IDMyIGJ5dGVz"},
	} {
		if _, err := ParseKeyring(c.keys, c.hmac); err == nil {
			t.Errorf("accepted keys %q hmac %q", c.keys, c.hmac)
		}
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	if got, err := Clean("  ABCD-1234 \r"); err != nil || got != "ABCD-1234" {
		t.Fatalf("Clean = %q, %v", got, err)
	}
	for _, bad := range []string{"", "   ", "--", strings.Repeat("A", 129), "AB\x00CD", "\xff\xfe"} {
		if _, err := Clean(bad); err == nil {
			t.Errorf("Clean(%q) accepted", bad)
		}
	}
}

// TestSealSecret: a sealed secret opens only for the context it was sealed
// for (a value copied to another endpoint's row does not open), under any
// key of a ring that lists its key, and never as a code.
func TestSealSecret(t *testing.T) {
	t.Parallel()
	k1, k2, h := NewKey(), NewKey(), NewKey()
	old, _ := ParseKeyring("k1:"+k1, h)
	rotated, _ := ParseKeyring("k2:"+k2+",k1:"+k1, h)
	sealed, id := old.SealSecret("webhook:a", "whsec_x")
	if got, err := rotated.OpenSecret("webhook:a", id, sealed); err != nil || got != "whsec_x" {
		t.Fatalf("open under the rotated ring: %q %v", got, err)
	}
	if _, err := old.OpenSecret("webhook:b", id, sealed); err == nil {
		t.Fatal("a secret opened for another context")
	}
	if _, err := old.Open(0, id, sealed); err == nil {
		t.Fatal("a secret opened as a code")
	}
	if again, id2 := rotated.SealSecret("webhook:a", "whsec_x"); id2 != "k2" || string(again) == string(sealed) {
		t.Fatalf("resealed under %q", id2)
	}
}
