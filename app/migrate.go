package app

import (
	"context"
	"log/slog"

	"inventory/config"
	"inventory/migrations"
)

// migrate applies the migrations (INVENTORY_MIGRATE_ON_START) or, without
// them, waits for another process to apply them: meanwhile the instance
// serves /healthz, and /readyz 503 saying to run `inventory migrate`;
// nothing reads a table before.
func migrate(ctx context.Context, cfg config.Config, db *pools, l *listener, logger *slog.Logger) error {
	if cfg.MigrateOnStart {
		applied, err := migrations.Up(ctx, db.river, logger)
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			logger.Info("applied migrations", "count", len(applied), "last", applied[len(applied)-1].String())
		}
		return nil
	}
	reason, err := migrations.Pending(ctx, db.river)
	if err != nil || reason == "" {
		return err
	}
	if err := l.listen(); err != nil {
		return err
	}
	logger.Warn("waiting for the database to be migrated (INVENTORY_MIGRATE_ON_START=false)", "reason", reason, "url", "http://"+l.ln.Addr().String())
	return waitMigrated(ctx, db.api, l.gate, reason)
}
