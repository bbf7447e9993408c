// Package codecrypt seals unit codes (gift-card PINs, game keys) for storage:
// AES-256-GCM with a key id stored beside each ciphertext so keys can rotate
// (old keys keep decrypting), and a keyed HMAC-SHA256 of the normalized code as
// the dedupe key, so the database can refuse a code twice without holding it in
// plaintext. Plaintext never leaves this package except to the caller that
// asked for it.
package codecrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// KeySize is the size of every key: AES-256 and the HMAC key.
const KeySize = 32

// MaxCodeLength bounds one code, in characters.
const MaxCodeLength = 128

// Keyring holds the encryption keys by id (the first is used for new codes)
// and the HMAC key, which never rotates: rotating it would break dedupe
// against stored codes.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	hmacKey []byte
}

// ParseKeyring reads INVENTORY_CODES_KEY ("id:base64key[,id:base64key…]", the
// first encrypts new codes, all decrypt) and INVENTORY_CODES_HMAC_KEY
// (base64). Keys are 32 bytes of standard or URL-safe base64.
func ParseKeyring(keys, hmacKey string) (*Keyring, error) {
	if strings.TrimSpace(keys) == "" {
		return nil, errors.New("INVENTORY_CODES_KEY is not set: it needs at least one id:base64key (32 bytes)")
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, part := range strings.Split(keys, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || id == "" || len(id) > 32 {
			return nil, fmt.Errorf("INVENTORY_CODES_KEY entry %d: want id:base64key", i+1)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("INVENTORY_CODES_KEY: key id %q appears twice", id)
		}
		raw, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("INVENTORY_CODES_KEY key %q: %w", id, err)
		}
		block, _ := aes.NewCipher(raw) // 32 bytes: cannot fail
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.aeads[id] = aead
		if i == 0 {
			k.current = id
		}
	}
	raw, err := decodeKey(hmacKey)
	if err != nil {
		return nil, fmt.Errorf("INVENTORY_CODES_HMAC_KEY: %w", err)
	}
	k.hmacKey = raw
	return k, nil
}

func decodeKey(b64 string) ([]byte, error) {
	b64 = strings.TrimSpace(b64)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(b64); err == nil {
			if len(raw) != KeySize {
				return nil, fmt.Errorf("want %d bytes, got %d", KeySize, len(raw))
			}
			return raw, nil
		}
	}
	return nil, errors.New("not base64")
}

// NewKey returns a fresh random key, base64-encoded, for make run and docs.
func NewKey() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// CurrentKeyID is the id new codes are sealed with.
func (k *Keyring) CurrentKeyID() string { return k.current }

// KeyIDs lists every key id the ring can decrypt.
func (k *Keyring) KeyIDs() []string {
	ids := make([]string, 0, len(k.aeads))
	for id := range k.aeads {
		ids = append(ids, id)
	}
	return ids
}

// Seal encrypts code with the current key. The additional data binds the
// ciphertext to its SKU, so a row copied to another SKU does not decrypt.
func (k *Keyring) Seal(skuID int64, code string) (ciphertext []byte, keyID string) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(code)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(code), aad(skuID)), k.current
}

// Open decrypts a sealed code. A wrong or missing key is an error, never
// garbage.
func (k *Keyring) Open(skuID int64, keyID string, ciphertext []byte) (string, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return "", fmt.Errorf("codecrypt: no key with id %q configured", keyID)
	}
	if len(ciphertext) < aead.NonceSize() {
		return "", errors.New("codecrypt: ciphertext too short")
	}
	plain, err := aead.Open(nil, ciphertext[:aead.NonceSize()], ciphertext[aead.NonceSize():], aad(skuID))
	if err != nil {
		return "", fmt.Errorf("codecrypt: key %q does not open this code: wrong key?", keyID)
	}
	return string(plain), nil
}

// Fingerprint is the dedupe key of a code: HMAC-SHA256 of its normalized form.
func (k *Keyring) Fingerprint(code string) []byte {
	m := hmac.New(sha256.New, k.hmacKey)
	m.Write([]byte(Normalize(code)))
	return m.Sum(nil)
}

func aad(skuID int64) []byte { return fmt.Appendf(nil, "sku:%d", skuID) }

// Normalize is the form two codes are compared in: without surrounding
// space, inner spaces and hyphens, upper-case. "abcd-efgh" and "ABCD EFGH" are
// the same code.
func Normalize(code string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, strings.TrimSpace(code)))
}

// Clean returns the code as it will be stored (trimmed) or an error saying
// why the line is rejected: blank, too long, or not printable text.
func Clean(line string) (string, error) {
	code := strings.TrimSpace(line)
	switch {
	case code == "":
		return "", errors.New("blank")
	case !utf8.ValidString(code):
		return "", errors.New("not UTF-8")
	case utf8.RuneCountInString(code) > MaxCodeLength:
		return "", fmt.Errorf("longer than %d characters", MaxCodeLength)
	case Normalize(code) == "":
		return "", errors.New("only separators")
	}
	for _, r := range code {
		if !unicode.IsPrint(r) {
			return "", errors.New("contains non-printable characters")
		}
	}
	return code, nil
}

// SealSecret encrypts a secret the server must read back (a webhook signing
// secret) with the current key. context names what it belongs to (for
// example "webhook:<id>:current") and is bound as additional data, so a
// sealed value copied to another row or column does not open.
func (k *Keyring) SealSecret(context, secret string) (ciphertext []byte, keyID string) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(secret), secretAAD(context)), k.current
}

// OpenSecret decrypts what SealSecret sealed for the same context.
func (k *Keyring) OpenSecret(context, keyID string, ciphertext []byte) (string, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return "", fmt.Errorf("codecrypt: no key with id %q configured", keyID)
	}
	if len(ciphertext) < aead.NonceSize() {
		return "", errors.New("codecrypt: ciphertext too short")
	}
	plain, err := aead.Open(nil, ciphertext[:aead.NonceSize()], ciphertext[aead.NonceSize():], secretAAD(context))
	if err != nil {
		return "", fmt.Errorf("codecrypt: key %q does not open this secret: wrong key?", keyID)
	}
	return string(plain), nil
}

// secretAAD cannot collide with a code's "sku:<n>".
func secretAAD(context string) []byte { return []byte("secret:" + context) }
