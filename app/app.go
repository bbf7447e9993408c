package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"inventory/auth"
	"inventory/config"
)

// Server is a running instance: its HTTP listener, River client and pools.
type Server struct {
	// URL is where it serves, http://host:port (a listen address of port 0
	// picks a free port: this says which).
	URL  string
	done chan error
}

// Start wires the whole application, starts serving on cfg.ListenAddr and
// shuts down gracefully when ctx ends: stop accepting, finish in-flight
// requests, stop River, close the pools. It returns once the instance
// serves; an error means nothing is left running.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Server, error) {
	secrets, err := cfg.TokenSecrets()
	if err != nil {
		return nil, err
	}
	tokens, err := auth.NewCheckoutTokens(secrets...)
	if err != nil {
		return nil, err
	}
	tokens.MaxTTL = int(cfg.CheckoutTokenMaxTTL / time.Second)
	keyring, err := cfg.Keyring()
	if err != nil {
		return nil, err
	}
	tr, err := startTracing(ctx, logger)
	if err != nil {
		return nil, err
	}
	db, err := openPools(ctx, cfg, sqlTracer(tr))
	if err != nil {
		_ = tr.Shutdown(ctx)
		return nil, err
	}
	l := newListener(ctx, cfg)
	ok := false
	defer func() {
		if !ok {
			l.abort()
			db.close()
			_ = tr.Shutdown(ctx)
		}
	}()
	if err := migrate(ctx, cfg, db, l, logger); err != nil {
		return nil, err
	}
	st, err := wireStores(ctx, cfg, db, keyring, tr, logger)
	if err != nil {
		return nil, err
	}
	live := wireLive(l.aux, cfg, db, st, logger)
	riverClient, err := wireJobs(cfg, db, st, live, tr, logger)
	if err != nil {
		return nil, err
	}
	router, err := wireRouter(l.aux, cfg, db, st, live, riverClient, tokens, secrets, tr, logger)
	if err != nil {
		return nil, err
	}
	if err := servePrivates(l.aux, cfg, live, logger); err != nil {
		return nil, err
	}
	if err := l.listen(); err != nil {
		return nil, err
	}
	run, err := startBackground(ctx, cfg, st, live, riverClient, logger)
	if err != nil {
		return nil, err
	}
	ok = true
	l.gate.open(router)
	s := &Server{URL: "http://" + l.ln.Addr().String(), done: make(chan error, 1)}
	go func() { s.done <- shutdown(ctx, cfg, l, run, db, tr, logger) }()
	logger.Info("serving", "url", s.URL, "tracing", tr.Enabled)
	return s, nil
}

// Wait blocks until the server has shut down and returns why, nil after a
// clean shutdown.
func (s *Server) Wait() error { return <-s.done }

// servePrivates starts the listeners that must not be on the API's port
// without a key: the profiler and /metrics, each when configured.
func servePrivates(ctx context.Context, cfg config.Config, live *live, logger *slog.Logger) error {
	if cfg.PprofAddr != "" {
		if err := servePrivate(ctx, "profiler", cfg.PprofAddr, pprofHandler(), logger); err != nil {
			return fmt.Errorf("INVENTORY_PPROF_ADDR: %w", err)
		}
	}
	if cfg.MetricsAddr != "" {
		if err := servePrivate(ctx, "metrics", cfg.MetricsAddr, live.metrics.Handler(), logger); err != nil {
			return fmt.Errorf("INVENTORY_METRICS_ADDR: %w", err)
		}
	}
	return nil
}
