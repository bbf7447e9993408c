package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
)

// riverUIPrefix is where River's job UI is mounted; its handler builds its
// links and API paths from the same prefix.
const riverUIPrefix = "/riverui"

// newRiverUI returns River's job UI for client, running until ctx ends
// (it has background work of its own).
func newRiverUI(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) (*riverui.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    riverUIPrefix,
		// Job args name reservations only, but they are an operator's
		// business: shown on request, not by default.
		JobListHideArgsByDefault: true,
	})
	if err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	return h, nil
}
