package jobs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietHandlerDemotesRoutineLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	logger.Info("producer: status")
	logger.Warn("job failed, will retry")
	logger.Error("leader election failed")
	out := buf.String()
	if strings.Contains(out, "producer") {
		t.Errorf("River's INFO line logged at INFO: %s", out)
	}
	if !strings.Contains(out, "level=WARN msg=\"job failed") || !strings.Contains(out, "level=ERROR msg=\"leader election") {
		t.Errorf("River's warnings and errors lost: %s", out)
	}
}
