package app

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/migrations"
)

// startGate is the HTTP server's handler: the application once it is built,
// and until then /healthz 200 and 503 for everything else, saying why
// (/readyz included, so a load balancer sends no traffic yet).
type startGate struct {
	app    atomic.Pointer[http.Handler]
	reason atomic.Pointer[string]
}

func (g *startGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.app.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	reason := "starting"
	if p := g.reason.Load(); p != nil {
		reason = *p
	}
	http.Error(w, "not ready: "+reason, http.StatusServiceUnavailable)
}

// open hands every request from now on to the application.
func (g *startGate) open(app http.Handler) { g.app.Store(&app) }

// migrationPoll is how often a waiting instance looks at the schema again.
const migrationPoll = time.Second

// waitMigrated returns once the database is migrated to what this binary
// needs, saying why not at /readyz meanwhile; an error if ctx ends first.
func waitMigrated(ctx context.Context, pool *pgxpool.Pool, gate *startGate, reason string) error {
	for reason != "" {
		gate.reason.Store(&reason)
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for the database to be migrated (%s)", reason)
		case <-time.After(migrationPoll):
		}
		var err error
		if reason, err = migrations.Pending(ctx, pool); err != nil {
			reason = "database unreachable"
		}
	}
	return nil
}
