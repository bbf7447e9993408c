package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"inventory/config"
	"inventory/jobs"
	"inventory/tracing"
)

// background is what runs beside the requests: River and the webhook
// dispatcher, the broker and the availability copy. Each runs on a context
// of its own, so shutdown stops them after HTTP has drained, in order, not
// all at the moment of the signal.
type background struct {
	river        *river.Client[pgx.Tx]
	runJobs      bool
	stopDispatch context.CancelFunc
	dispatchDone chan struct{}
	stopBroker   context.CancelFunc
	brokerDone   chan error
	copyDone     chan struct{}
}

func startBackground(ctx context.Context, cfg config.Config, st stores, live *live, riverClient *river.Client[pgx.Tx], logger *slog.Logger) (*background, error) {
	b := &background{river: riverClient, runJobs: cfg.RunJobs, dispatchDone: make(chan struct{}), brokerDone: make(chan error, 1), copyDone: make(chan struct{})}
	var dispatchCtx context.Context
	dispatchCtx, b.stopDispatch = context.WithCancel(context.WithoutCancel(ctx))
	if cfg.RunJobs {
		if err := riverClient.Start(context.WithoutCancel(ctx)); err != nil {
			b.stopDispatch()
			return nil, fmt.Errorf("start river: %w", err)
		}
		dispatcher := &jobs.WebhookDispatcher{Store: st.jobs, Client: riverClient, Logger: logger}
		go func() { defer close(b.dispatchDone); dispatcher.Run(dispatchCtx) }()
	} else {
		close(b.dispatchDone)
	}
	var brokerCtx context.Context
	brokerCtx, b.stopBroker = context.WithCancel(context.WithoutCancel(ctx))
	go func() { b.brokerDone <- live.broker.Run(brokerCtx) }()
	go func() {
		defer close(b.copyDone)
		if live.copy != nil {
			live.copy.Run(brokerCtx)
		}
	}()
	return b, nil
}

// shutdown waits for ctx to end (or the listener to fail), then stops
// everything in order: the broker first, so live subscriptions end (and
// their sockets close) before the pool they read from; the dispatcher, so
// it inserts nothing once River is stopping; HTTP, letting in-flight
// requests finish within INVENTORY_SHUTDOWN_TIMEOUT; River; the pools.
func shutdown(ctx context.Context, cfg config.Config, l *listener, b *background, db *pools, tr *tracing.Tracing, logger *slog.Logger) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-l.serveErr:
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	b.stopBroker()
	b.stopDispatch()
	<-b.dispatchDone
	<-b.copyDone
	err = errors.Join(err, <-b.brokerDone, ignoreClosed(l.server.Shutdown(shutdownCtx)), stopRiver(shutdownCtx, b.river, b.runJobs))
	l.stopAux()
	db.close()
	// Last, so the spans of the shutdown's own work are exported too.
	return errors.Join(err, tr.Shutdown(shutdownCtx))
}

func stopRiver(ctx context.Context, c *river.Client[pgx.Tx], started bool) error {
	if !started {
		return nil
	}
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("stop river: %w", err)
	}
	return nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
