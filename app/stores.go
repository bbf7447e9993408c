package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/codecrypt"
	"inventory/config"
	"inventory/jobs"
	"inventory/store"
	"inventory/tracing"
)

// stores are one store per pool: what requests do, what jobs do, what the
// event relay does, each on connections of its own.
type stores struct {
	api, jobs, events *store.Store
}

// wireStores builds the stores and checks, before anything is served, that
// the configured codes key opens the codes already sealed; webhook secrets
// from before they were sealed are sealed now, so no plaintext secret
// outlives the upgrade.
func wireStores(ctx context.Context, cfg config.Config, db *pools, keyring *codecrypt.Keyring, tr *tracing.Tracing, logger *slog.Logger) (stores, error) {
	var s stores
	var err error
	if s.api, err = newStore(db.api, tr); err != nil {
		return s, err
	}
	s.api.Keyring = keyring
	s.api.WebhookAllowPrivate = cfg.WebhookAllowPrivate
	s.api.Logger = logger
	if err := s.api.CodesKeyCheck(ctx); err != nil {
		return s, err
	}
	if n, err := s.api.WebhookSecretsSeal(ctx); err != nil {
		return s, fmt.Errorf("webhook secrets: %w", err)
	} else if n > 0 {
		logger.Info("sealed webhook secrets under the current codes key", "endpoints", n, "key_id", keyring.CurrentKeyID())
	}
	if s.jobs, err = newStore(db.jobs, tr); err != nil {
		return s, err
	}
	s.jobs.Keyring = keyring
	s.events, err = newStore(db.events, tr)
	return s, err
}

// newStore returns a store on pool whose holds schedule their expiry jobs
// through River: every store the binary builds is one.
func newStore(pool *pgxpool.Pool, tr *tracing.Tracing) (*store.Store, error) {
	expiry, err := jobs.NewScheduler(pool, tr)
	if err != nil {
		return nil, err
	}
	st := store.New(pool)
	st.Expiry = expiry
	st.Tracer = tr.Provider.Tracer(tracing.ScopeName)
	return st, nil
}
