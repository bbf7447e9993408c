package app

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"inventory/tracing"
)

// startTracing reads the OTEL_* environment (tracing.FromEnv). The server's
// version on its spans is the build's VCS revision.
// OpenTelemetry's own errors (an export refused or failing) are logged at
// WARN: by default they go to Go's log, which we keep at DEBUG, and spans
// being dropped must not be silent.
func startTracing(ctx context.Context, logger *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.FromEnv(ctx, os.LookupEnv, buildRevision())
	if err == nil && tr.Enabled {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing: spans not exported", "err", err)
		}))
	}
	return tr, err
}

// buildRevision is the commit the binary was built from, "devel" when the
// build recorded none (go test, go run without VCS).
func buildRevision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
	}
	return "devel"
}

// sqlTracer makes one span per SQL statement (its text, never its
// arguments: codes and keys travel as arguments) and one per wait for a
// pooled connection; nil, no tracer at all, when tracing is off. otelpgx is
// the pgx tracer the OpenTelemetry registry lists, and it starts a span only
// under a recorded one, so background statements outside any traced work
// make none. Within a GraphQL operation it spans at most
// tracing.MaxSQLSpans statements (budgetedSQL).
func sqlTracer(tr *tracing.Tracing) pgx.QueryTracer {
	if !tr.Enabled {
		return nil
	}
	return budgetedSQL{otelpgx.NewTracer(otelpgx.WithTracerProvider(tr.Provider), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()))}
}
