package main

import (
	"log"
	"log/slog"
)

// routeLibraryLogs sends what libraries print with the standard library's
// logger into the structured log, at DEBUG. gqlgen prints there a WebSocket
// upgrade it could not make and, in full, an SSE request body it could not
// decode: caller mistakes, at no level and outside the log's format, and as
// much text as a caller cares to send. The serve command alone calls it (it
// sets the process-wide logger); tests that start servers in-process keep the
// standard logger.
func routeLibraryLogs(logger *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelDebug).Writer())
}
