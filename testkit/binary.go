package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// built is the server binary of this test process: built once, on first use.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// ServerBinary builds the inventory binary (the module's main package,
// without -race: it runs at its normal speed while a test attacks it or
// injects faults) once per test process and returns its path. Tests that
// need the server as its own process use it: a peak RSS no other parallel
// test inflates, a process to SIGKILL or SIGSTOP, the documentation's shell
// blocks. A package that uses it calls RunWithBinary from its TestMain, so
// the build is removed afterwards.
func ServerBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "inventory-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "inventory")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// "inventory" is the module's main package, wherever the test runs.
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", built.path, "inventory").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// RunWithBinary runs a package's tests (a TestMain's m.Run) and then
// removes the binary ServerBinary built, if it did.
func RunWithBinary(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}
