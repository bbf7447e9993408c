package api

import (
	"context"
	"sync"
)

// anonymousSockets counts the WebSockets without a token each client
// address holds open on this instance. Anyone may open one (product pages
// watch availabilityChanged without a token), and each holds a goroutine
// and buffers until it closes, so one address may hold max at once; 0 is
// no cap.
type anonymousSockets struct {
	max  int
	mu   sync.Mutex
	byIP map[string]int
}

func newAnonymousSockets(max int) *anonymousSockets {
	return &anonymousSockets{max: max, byIP: map[string]int{}}
}

// acquire takes a place for the socket of ctx's client address, given back
// when ctx (the upgrade request's, which ends when the socket does) ends.
func (a *anonymousSockets) acquire(ctx context.Context) bool {
	if a == nil || a.max <= 0 {
		return true
	}
	key := ipKey(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byIP[key] >= a.max {
		return false
	}
	a.byIP[key]++
	context.AfterFunc(ctx, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.byIP[key]--; a.byIP[key] <= 0 {
			delete(a.byIP, key)
		}
	})
	return true
}
