package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

// Well-formed code keys (32 bytes each, base64) for a valid environment.
var (
	testCodesKey = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("c", 32)))
	testHMACKey  = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("h", 32)))
)

// cliRun runs one command line with env as the whole environment.
func cliRun(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}
