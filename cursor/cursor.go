// Package cursor signs the after cursors of the Relay connections and checks
// the ones clients send back. It has one job: a cursor is opaque, and only
// one this server signed, for the same list and scope, is ever accepted.
//
// A cursor is base64url (unpadded, canonical) of
//
//	version (1 byte) | fields | HMAC-SHA256(key, list | scope | version | fields)
//
// where fields is the keyset position of the row it continues after, each
// field a uvarint length then its bytes. The list ("balances",
// "reservations", …) and its scope (the checkoutId or endpointId whose list
// it is; "" for a list without one) are not in the cursor, only under its
// MAC: a cursor of checkout A's reservations does not verify as checkout
// B's, nor as another list's, and an edited one verifies as nothing.
//
// The keys are derived from INVENTORY_TOKEN_SECRET's ring (HMAC-SHA256 of
// each secret with a label of their own), so every instance given the same
// secrets signs and accepts the same cursors, and a rotation keeps the
// cursors signed before it valid while the old secret stays listed. Cursors
// carry no expiry: a position in a list is not a credential, and reading
// the list still takes the caller's own authorization.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
)

// version is the first byte of every cursor; another layout takes another.
const version = 1

// label separates the cursor keys from every other use of the token
// secrets (checkout tokens, admin sessions).
const label = "inventory relay cursor key v1"

// MaxLength bounds the cursors accepted, in characters: far above any this
// server signs, so nothing larger is even decoded.
const MaxLength = 2048

// ErrInvalid is every refusal: not a cursor, edited, or signed for another
// list, scope or key. It deliberately says no more.
var ErrInvalid = errors.New("not a cursor of this list")

var encoding = base64.RawURLEncoding.Strict()

// List names the list a cursor pages through: its kind and its scope.
type List struct {
	Kind  string
	Scope string
}

// Signer signs with the first key and verifies with any of them.
type Signer struct {
	keys [][]byte
}

// New derives one cursor key per secret, the first signing; at least one
// secret is needed.
func New(secrets ...[]byte) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("cursor: no secret to derive a key from")
	}
	s := &Signer{}
	for _, secret := range secrets {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		s.keys = append(s.keys, m.Sum(nil))
	}
	return s, nil
}

// Sign returns the cursor of the position fields in list.
func (s *Signer) Sign(list List, fields ...string) string {
	body := []byte{version}
	for _, f := range fields {
		body = binary.AppendUvarint(body, uint64(len(f)))
		body = append(body, f...)
	}
	return encoding.EncodeToString(append(body, mac(s.keys[0], list, body)...))
}

// Open verifies c as a cursor of list and returns its n fields; any other
// cursor, string or field count is ErrInvalid.
func (s *Signer) Open(c string, list List, n int) ([]string, error) {
	if len(c) > MaxLength || strings.IndexFunc(c, notBase64URL) >= 0 {
		// The decoder skips \r and \n: one spelling per cursor only.
		return nil, ErrInvalid
	}
	raw, err := encoding.DecodeString(c)
	if err != nil || len(raw) < 1+sha256.Size || raw[0] != version {
		return nil, ErrInvalid
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	ok := false
	for _, k := range s.keys {
		ok = hmac.Equal(sum, mac(k, list, body)) || ok
	}
	if !ok {
		return nil, ErrInvalid
	}
	fields := make([]string, 0, n)
	rest := body[1:]
	for len(rest) > 0 {
		l, w := binary.Uvarint(rest)
		if w <= 0 || l > uint64(len(rest)-w) {
			return nil, ErrInvalid
		}
		fields = append(fields, string(rest[w:w+int(l)]))
		rest = rest[w+int(l):]
	}
	if len(fields) != n {
		return nil, ErrInvalid
	}
	return fields, nil
}

// mac binds the body to its list and scope, each length-prefixed so that no
// two (kind, scope) pairs feed the MAC the same bytes.
func mac(key []byte, list List, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	var b []byte
	for _, part := range []string{list.Kind, list.Scope} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	m.Write(b)
	m.Write(body)
	return m.Sum(nil)
}

func notBase64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}
