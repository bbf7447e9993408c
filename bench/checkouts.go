package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"inventory/auth"
)

// holdsPerCheckout is how many reserves a load client makes as one shopper
// before it is another: under the server's fair-use defaults for checkout
// tokens (20 live holds, 10 units of one SKU), so that the bench measures
// the limits' check as a flash sale meets it, many shoppers with a few
// holds each, rather than one checkout with thousands of holds.
const holdsPerCheckout = 10

// shoppers hands each load client a checkout and its token, and a fresh one
// every holdsPerCheckout requests. Tokens are minted in-process with the
// server's secret, which is what issueCheckoutToken does, without a request
// per shopper in the measured load.
type shoppers struct {
	tokens  *auth.CheckoutTokens
	serial  atomic.Int64
	clients []shopper
}

type shopper struct {
	mu        sync.Mutex
	id, token string
	used      int
}

// newShoppers returns shoppers for n clients, minting with the
// INVENTORY_TOKEN_SECRET in env.
func newShoppers(env []string, n int) (*shoppers, error) {
	var secret string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "INVENTORY_TOKEN_SECRET="); ok {
			secret = v
		}
	}
	secrets, err := auth.ParseTokenSecrets(secret)
	if err != nil {
		return nil, fmt.Errorf("checkout tokens: %w", err)
	}
	tokens, err := auth.NewCheckoutTokens(secrets...)
	if err != nil {
		return nil, fmt.Errorf("checkout tokens: %w", err)
	}
	return &shoppers{tokens: tokens, clients: make([]shopper, n)}, nil
}

// next returns client c's checkout id and token for its next reserve.
func (s *shoppers) next(c int) (string, string, error) {
	sh := &s.clients[c]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.token == "" || sh.used == holdsPerCheckout {
		id := "co-" + strconv.Itoa(c) + "-" + strconv.FormatInt(s.serial.Add(1), 10)
		ttl := 3600
		token, _, err := s.tokens.Issue(id, &ttl)
		if err != nil {
			return "", "", err
		}
		sh.id, sh.token, sh.used = id, token, 0
	}
	sh.used++
	return sh.id, sh.token, nil
}
