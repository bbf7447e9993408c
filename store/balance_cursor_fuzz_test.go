package store

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"inventory/domain"
)

// encodeBalanceCursor is the cursor BalanceList writes for the last balance
// of a page (it builds it inline).
func encodeBalanceCursor(sku, location string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(sku + "\x00" + location))
}

// FuzzBalanceCursor: decodeBalanceCursor never panics; "" is the first page;
// any other string is either refused with the one fixed BAD_REQUEST message
// (which quotes nothing) or is unpadded base64url of "sku\x00location" with a
// NUL-free SKU. A cursor written for a page ending at any SKU and location
// that are identifiers decodes to exactly them, and is URL-safe.
func FuzzBalanceCursor(f *testing.F) {
	for _, s := range [][3]string{
		{"", "SKU-1", "AMS"},
		{encodeBalanceCursor("SKU-1", "AMS"), "SKU-1", "AMS"},
		{encodeBalanceCursor("", ""), "", ""},
		{encodeBalanceCursor("a\x00b", "c"), "a b", "c\x00d"},
		{encodeBalanceCursor("日本", "€"), "日本", "€"},
		{encodeBalanceCursor("\xff", "\xfe"), "x", "y"},
		{base64.URLEncoding.EncodeToString([]byte("SKU-1\x00AMS")), "SKU-1", "AMS"},
		{base64.StdEncoding.EncodeToString([]byte("?>?\x00~~~")), "?>?", "~~~"},
		{"not a cursor", strings.Repeat("s", 128), strings.Repeat("l", 129)},
		{"U0tVLTE", "SKU-1", ""},
		{"U0tVLTEAQU1T\n", "SKU-1", "AMS"},
		{"====", "=", "="},
		{"A", "\t", " "},
		{strings.Repeat("QUFB", 2048), "x", "y"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, after, sku, location string) {
		gotSKU, gotLoc, err := decodeBalanceCursor(after)
		switch {
		case after == "":
			if gotSKU != "" || gotLoc != "" || err != nil {
				t.Fatalf(`decodeBalanceCursor("") = %q, %q, %v; want the first page`, gotSKU, gotLoc, err)
			}
		case err != nil:
			if e, ok := err.(*domain.LimitError); !ok || e.Message != "after is not a cursor from a previous page" {
				t.Fatalf("decodeBalanceCursor(%q): %T %v; want the fixed LimitError", after, err, err)
			}
			if gotSKU != "" || gotLoc != "" {
				t.Fatalf("decodeBalanceCursor(%q) returned %q, %q with an error", after, gotSKU, gotLoc)
			}
		default:
			raw, derr := base64.RawURLEncoding.DecodeString(after)
			if derr != nil {
				t.Fatalf("decodeBalanceCursor accepted %q, which is not unpadded base64url: %v", after, derr)
			}
			if string(raw) != gotSKU+"\x00"+gotLoc || strings.Contains(gotSKU, "\x00") {
				t.Fatalf("decodeBalanceCursor(%q) = %q, %q from %q", after, gotSKU, gotLoc, raw)
			}
			if !utf8.ValidString(gotSKU) || !utf8.ValidString(gotLoc) || strings.Contains(gotLoc, "\x00") {
				t.Fatalf("decodeBalanceCursor(%q) accepted %q, %q, which PostgreSQL cannot take as text", after, gotSKU, gotLoc)
			}
		}

		if domain.CheckIdentifier(nil, sku) != nil || domain.CheckIdentifier(nil, location) != nil {
			return
		}
		cursor := encodeBalanceCursor(sku, location)
		if cursor == "" || strings.Trim(cursor, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("cursor %q for %q, %q is not URL-safe", cursor, sku, location)
		}
		s, l, err := decodeBalanceCursor(cursor)
		if err != nil || s != sku || l != location {
			t.Fatalf("round trip of %q, %q via %q gave %q, %q, %v", sku, location, cursor, s, l, err)
		}
	})
}
