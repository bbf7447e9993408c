package api

import (
	"context"
	"sync"
	"time"
)

// readinessTTL is how long one readiness check answers every /readyz.
const readinessTTL = 500 * time.Millisecond

// sharedReadiness runs check at most once per ttl, however many probes ask:
// each check pings the database, reads River's migrations and goose's
// version on the request pool, and /readyz is anyone's to call (a flood
// of probes from a few addresses would otherwise take the whole pool and
// queue a checkout's reserve behind them). Probes that arrive while a
// check runs wait for it (or their own context) and share its answer.
func sharedReadiness(check Readiness, ttl time.Duration) Readiness {
	var mu sync.Mutex
	var at time.Time
	var reason string
	var err error
	var running chan struct{} // closed when the check in flight ends
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		if !at.IsZero() && time.Since(at) < ttl {
			r, e := reason, err
			mu.Unlock()
			return r, e
		}
		wait := running
		if wait == nil {
			running = make(chan struct{})
			wait = running
			go func() {
				// Not bound to the probe that started it: others wait on it.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
				r, e := check(cctx)
				cancel()
				mu.Lock()
				reason, err, at = r, e, time.Now()
				close(running)
				running = nil
				mu.Unlock()
			}()
		}
		mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		mu.Lock()
		defer mu.Unlock()
		return reason, err
	}
}
