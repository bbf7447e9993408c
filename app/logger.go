package app

import (
	"io"
	"log"
	"log/slog"
)

// NewLogger is the server's and the commands' log: text lines at level
// (debug, info, warn, error; info when it is none of them).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// RouteLibraryLogs sends what libraries print with the standard library's
// logger into the structured log, at DEBUG. gqlgen prints there a WebSocket
// upgrade it could not make and, in full, an SSE request body it could not
// decode: caller mistakes, at no level and outside the log's format, and as
// much text as a caller cares to send. The serve command alone calls it (it
// sets the process-wide logger); tests that start servers in-process keep the
// standard logger.
func RouteLibraryLogs(logger *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(logger.Handler(), slog.LevelDebug).Writer())
}
